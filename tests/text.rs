//! The sanitiser against its invariants (proptest), the attack corpora under
//! `tests/data/text/`, and Unicode's own Default_Ignorable_Code_Point list.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use proctor::text::{
    self, InvisibleClass, MAX_CLUSTER_CHARS, MAX_RUN_NAME_CHARS, NameError, multi_line,
    multi_line_bytes, multi_line_capped, multi_line_capped_bytes, one_line, one_line_bytes,
    validate_run_name,
};
use proptest::prelude::*;
use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};
use unicode_segmentation::UnicodeSegmentation;
use unicode_width::UnicodeWidthStr;

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/text")
}

/// Default_Ignorable_Code_Point, parsed from Unicode's file (not from `src/text.rs`).
fn default_ignorable() -> &'static BTreeSet<u32> {
    static SET: OnceLock<BTreeSet<u32>> = OnceLock::new();
    SET.get_or_init(|| {
        let path = data_dir().join("DerivedCoreProperties-15.0.0-DI.txt");
        let body = fs::read_to_string(&path).expect("DI extract");
        let mut set = BTreeSet::new();
        for line in body.lines() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let (range, prop) = line.split_once(';').expect("field separator");
            assert_eq!(prop.trim(), "Default_Ignorable_Code_Point");
            let range = range.trim();
            let (lo, hi) = match range.split_once("..") {
                Some((lo, hi)) => (lo, hi),
                None => (range, range),
            };
            let lo = u32::from_str_radix(lo, 16).expect("hex");
            let hi = u32::from_str_radix(hi, 16).expect("hex");
            set.extend(lo..=hi);
        }
        set
    })
}

const BIDI_CONTROLS: [u32; 12] = [
    0x061C, 0x200E, 0x200F, 0x202A, 0x202B, 0x202C, 0x202D, 0x202E, 0x2066, 0x2067, 0x2068, 0x2069,
];

/// The invariants every display output holds, checked with oracles independent of the
/// module: no control (LF only where allowed), so no ESC and no C0/C1/DEL; no Bidi_Control,
/// no Cf, no Default_Ignorable, no U+2028/U+2029; no cluster over the cap.
fn assert_safe(out: &str, allow_lf: bool) {
    for (i, c) in out.chars().enumerate() {
        let cp = u32::from(c);
        assert!(
            !c.is_control() || (allow_lf && c == '\n'),
            "control U+{cp:04X} at {i} in {out:?}"
        );
        assert!(!BIDI_CONTROLS.contains(&cp), "bidi U+{cp:04X} in {out:?}");
        assert_ne!(
            c.general_category(),
            GeneralCategory::Format,
            "Cf U+{cp:04X} in {out:?}"
        );
        assert!(
            !default_ignorable().contains(&cp),
            "DI U+{cp:04X} in {out:?}"
        );
        assert!(
            !matches!(c, '\u{2028}' | '\u{2029}'),
            "separator in {out:?}"
        );
    }
    for g in out.graphemes(true) {
        assert!(
            g.chars().count() <= MAX_CLUSTER_CHARS,
            "cluster {g:?} in {out:?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Unicode tables
// ---------------------------------------------------------------------------------------------

#[test]
fn default_ignorable_table_matches_unicode_file() {
    let set = default_ignorable();
    assert_eq!(set.len(), 4174);
    for c in (0..=0x10FFFFu32).filter_map(char::from_u32) {
        assert_eq!(
            text::is_default_ignorable(c),
            set.contains(&u32::from(c)),
            "U+{:04X}",
            u32::from(c)
        );
    }
}

#[test]
fn every_invisible_character_is_marked_and_every_control_removed() {
    // Exhaustive over all scalar values: each is removed, marked, or kept as itself.
    for c in (0..=0x10FFFFu32).filter_map(char::from_u32) {
        let cp = u32::from(c);
        let s = format!("a{c}");
        let out = one_line(&s, usize::MAX);
        let invisible = BIDI_CONTROLS.contains(&cp)
            || c.general_category() == GeneralCategory::Format
            || default_ignorable().contains(&cp)
            || matches!(c, '\u{2028}' | '\u{2029}');
        if invisible {
            assert_eq!(out, format!("a⟨U+{cp:04X}⟩"), "U+{cp:04X}");
        } else if c.is_control() {
            // ESC and the C1 introducers start a sequence that swallows the rest: here, nothing.
            assert_eq!(out, "a", "U+{cp:04X}");
        } else {
            assert_eq!(out, s, "U+{cp:04X}");
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Corpora
// ---------------------------------------------------------------------------------------------

/// Every case the corpora must hold: a missing file fails rather than passing vacuously.
const REQUIRED: &[&str] = &[
    "trojan-source/early-return.py",
    "trojan-source/commenting-out.rs",
    "trojan-source/stretched-string.js",
    "trojan-source/invisible-function.js",
    "trojan-source/homoglyph-function-residual.js",
    "escapes/cursor-up-erase-line",
    "escapes/cursor-home-clear-screen",
    "escapes/cursor-save-restore",
    "escapes/csi-c1-utf8",
    "escapes/csi-c1-raw-byte",
    "escapes/bare-cr-overwrite",
    "escapes/backspace-overstrike",
    "escapes/crlf-lines",
    "escapes/osc52-clipboard-bel",
    "escapes/osc52-clipboard-st",
    "escapes/osc52-clipboard-c1-raw",
    "escapes/osc52-clipboard-c1-utf8",
    "escapes/osc52-clipboard-query",
    "escapes/osc8-hyperlink",
    "escapes/window-title-set",
    "escapes/window-title-report",
    "escapes/decrqss-query",
    "escapes/device-attributes-and-status",
    "escapes/sgr-conceal-revealed",
    "escapes/unterminated-osc",
    "escapes/unterminated-dcs",
    "escapes/apc-pm-sos",
    "escapes/charset-designation",
    "escapes/tmux-passthrough",
    "escapes/keypad-and-reset",
    "invisible/emoji-variation-selector-payload",
    "invisible/tag-character-payload",
    "invisible/hangul-fillers",
    "invisible/zero-width",
    "invisible/line-paragraph-separators",
];

fn corpus_cases() -> Vec<String> {
    let mut cases = Vec::new();
    for class in ["trojan-source", "escapes", "invisible"] {
        let dir = data_dir().join(class);
        for entry in fs::read_dir(&dir).expect("corpus dir") {
            let name = entry.expect("dir entry").file_name();
            let name = name.to_str().expect("UTF-8 file name");
            if let Some(stem) = name.strip_suffix(".in") {
                cases.push(format!("{class}/{stem}"));
            }
        }
    }
    cases.sort();
    cases
}

#[test]
fn corpora_show_exactly_the_visible_text() {
    let cases = corpus_cases();
    for required in REQUIRED {
        assert!(
            cases.iter().any(|c| c == required),
            "missing corpus case {required}"
        );
    }
    for case in &cases {
        let input = fs::read(data_dir().join(format!("{case}.in"))).expect("input");
        let expected = fs::read_to_string(data_dir().join(format!("{case}.out"))).expect("out");

        let multi = multi_line_bytes(&input);
        assert_eq!(multi, expected, "{case}: multi_line_bytes");
        assert_safe(&multi, true);

        let one = one_line_bytes(&input, usize::MAX);
        assert_eq!(one, expected.replace('\n', ""), "{case}: one_line_bytes");
        assert_safe(&one, false);

        // Idempotent on the corpus too.
        assert_eq!(multi_line(&multi), multi, "{case}: second pass");
        assert_eq!(one_line(&one, usize::MAX), one, "{case}: second pass");

        // Capped to a narrow width, still safe and within width.
        let capped = one_line_bytes(&input, 20);
        assert!(capped.width() <= 20, "{case}: {capped:?}");
        assert_safe(&capped, false);
    }
}

#[test]
fn corpus_inputs_really_hold_the_attack_bytes() {
    // Guard against a corpus that was "sanitised" on its way into the repository.
    let read = |case: &str| fs::read(data_dir().join(format!("{case}.in"))).expect("input");
    let has = |bytes: &[u8], needle: &[u8]| bytes.windows(needle.len()).any(|w| w == needle);
    assert!(has(&read("escapes/osc52-clipboard-bel"), b"\x1b]52;c;"));
    assert!(has(&read("escapes/csi-c1-raw-byte"), b"\x9b2K"));
    assert!(has(&read("escapes/bare-cr-overwrite"), b"\r"));
    assert!(has(&read("escapes/decrqss-query"), b"\x1bP$q"));
    assert!(has(
        &read("trojan-source/early-return.py"),
        "\u{2067}".as_bytes()
    ));
    assert!(has(
        &read("trojan-source/commenting-out.rs"),
        "\u{202e}".as_bytes()
    ));
    assert!(has(
        &read("trojan-source/invisible-function.js"),
        "\u{200b}".as_bytes()
    ));
    assert!(has(
        &read("invisible/emoji-variation-selector-payload"),
        "\u{e0162}".as_bytes()
    ));
}

// ---------------------------------------------------------------------------------------------
// Properties
// ---------------------------------------------------------------------------------------------

/// Characters chosen to hit every branch: escape introducers and terminators, C0/C1, bidi,
/// Cf, Default_Ignorable, combining marks, Prepend, Hangul jamo, regional indicators, emoji
/// and modifiers, Indic conjuncts, wide characters, and the marker's own characters.
fn interesting_char() -> impl Strategy<Value = char> {
    prop::sample::select(vec![
        '\u{1b}',
        '[',
        ']',
        'P',
        'X',
        '^',
        '_',
        '\\',
        '(',
        '#',
        '$',
        '?',
        ';',
        '0',
        '1',
        '9',
        'm',
        'q',
        'c',
        'Z',
        ' ',
        'a',
        '\u{07}',
        '\u{08}',
        '\t',
        '\n',
        '\r',
        '\u{18}',
        '\u{1a}',
        '\u{7f}',
        '\u{80}',
        '\u{85}',
        '\u{90}',
        '\u{98}',
        '\u{9b}',
        '\u{9c}',
        '\u{9d}',
        '\u{9e}',
        '\u{9f}',
        '\u{ad}',
        '\u{34f}',
        '\u{61c}',
        '\u{600}',
        '\u{200b}',
        '\u{200d}',
        '\u{200e}',
        '\u{202e}',
        '\u{2066}',
        '\u{2069}',
        '\u{2028}',
        '\u{2029}',
        '\u{2060}',
        '\u{2065}',
        '\u{feff}',
        '\u{fe0f}',
        '\u{fe0e}',
        '\u{e0100}',
        '\u{e01ef}',
        '\u{e0041}',
        '\u{e007f}',
        '\u{e0fff}',
        '\u{3164}',
        '\u{115f}',
        '\u{1160}',
        '\u{ffa0}',
        '\u{180b}',
        '\u{180e}',
        '\u{301}',
        '\u{336}',
        '\u{20dd}',
        '\u{903}',
        '\u{d4e}',
        '\u{111c2}',
        '\u{1100}',
        '\u{1161}',
        '\u{11a8}',
        '\u{ac00}',
        '\u{ac01}',
        '\u{1f1e6}',
        '\u{1f1e8}',
        '\u{1f468}',
        '\u{1f3fd}',
        '\u{2764}',
        '\u{915}',
        '\u{94d}',
        '\u{937}',
        '\u{4e16}',
        '\u{ff21}',
        '\u{644}',
        '\u{627}',
        '\u{17d2}',
        '\u{1780}',
        '\u{2026}',
        '\u{27e8}',
        '\u{27e9}',
        '\u{25cc}',
        '\u{fffd}',
    ])
}

fn hostile_string() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof![
            6 => interesting_char().prop_map(String::from),
            2 => any::<char>().prop_map(String::from),
            1 => prop::sample::select(vec![
                "\x1b[", "\x1b]", "\x1bP", "\x1b\\", "\x1b]8;;", "\x1b]52;c;", "\u{9b}",
                "\u{9d}", "\x1b[1A", "\x1b[2J", "\u{202e}", "\u{2066}",
            ])
            .prop_map(String::from),
            1 => (interesting_char(), 1usize..40).prop_map(|(c, n)| c.to_string().repeat(n)),
        ],
        0..64,
    )
    .prop_map(|parts| parts.concat())
}

fn hostile_bytes() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop_oneof![
            3 => any::<u8>(),
            2 => prop::sample::select(vec![
                0x1b, 0x9b, 0x9c, 0x9d, 0x90, 0x07, b'[', b']', b'\\', b'P', b';', b'm', b'\n',
                b'\r', 0xc2, 0xe2, 0x80, 0xae, 0xf3, 0xa0, 0x84, 0xbf,
            ]),
        ],
        0..128,
    )
}

fn width() -> impl Strategy<Value = usize> {
    prop_oneof![4 => 0usize..40, 1 => Just(usize::MAX)]
}

fn width_ok(out: &str, max: usize) -> bool {
    max == usize::MAX || out.width() <= max
}

proptest! {
    // Failures print their minimal input; no regression file (none of the test-file
    // layouts proptest knows applies to an integration test).
    #![proptest_config(ProptestConfig {
        cases: 1000,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn one_line_is_safe_within_width_and_idempotent(s in hostile_string(), w in width()) {
        let out = one_line(&s, w);
        assert_safe(&out, false);
        prop_assert!(width_ok(&out, w), "{out:?} wider than {w}");
        prop_assert!(w == usize::MAX || out.graphemes(true).count() <= w, "{out:?}: clusters");
        prop_assert_eq!(one_line(&out, w), out.clone());
        if w == 0 {
            prop_assert_eq!(out, "");
        }
    }

    #[test]
    fn truncation_cuts_on_a_grapheme_boundary(s in hostile_string(), w in 1usize..40) {
        let full = one_line(&s, usize::MAX);
        let out = one_line(&s, w);
        if out != full {
            let kept = out.strip_suffix('…').expect("a cut field ends with …");
            prop_assert!(full.starts_with(kept), "{out:?} is not a prefix of {full:?}");
            let boundaries: Vec<usize> =
                full.grapheme_indices(true).map(|(i, _)| i).chain([full.len()]).collect();
            prop_assert!(boundaries.contains(&kept.len()), "cut inside a cluster: {out:?}");
            // Cut only when the whole would not fit: too wide, or more clusters than columns
            // (a zero-width cluster counts as one column).
            let columns: usize = full.graphemes(true).map(|g| g.width().max(1)).sum();
            prop_assert!(full.width() > w || columns > w, "{full:?} fits in {w}");
        }
    }

    #[test]
    fn multi_line_is_safe_and_idempotent(s in hostile_string()) {
        let out = multi_line(&s);
        assert_safe(&out, true);
        prop_assert_eq!(multi_line(&out), out.clone());
        prop_assert_eq!(multi_line_capped(&s, usize::MAX), out.clone());
        // The one-line form never holds LF.
        prop_assert!(!one_line(&s, usize::MAX).contains('\n'));
    }

    #[test]
    fn multi_line_capped_caps_every_line(s in hostile_string(), w in width()) {
        let out = multi_line_capped(&s, w);
        assert_safe(&out, true);
        for line in out.split('\n') {
            prop_assert!(width_ok(line, w), "{line:?} wider than {w}");
        }
        prop_assert_eq!(out.split('\n').count(), multi_line(&s).split('\n').count());
        prop_assert_eq!(multi_line_capped(&out, w), out.clone());
    }

    #[test]
    fn bytes_entry_points_are_safe(b in hostile_bytes(), w in width()) {
        let one = one_line_bytes(&b, w);
        assert_safe(&one, false);
        prop_assert!(width_ok(&one, w));
        prop_assert_eq!(one_line(&one, w), one.clone());
        let multi = multi_line_bytes(&b);
        assert_safe(&multi, true);
        prop_assert_eq!(multi_line(&multi), multi.clone());
        let capped = multi_line_capped_bytes(&b, w);
        assert_safe(&capped, true);
    }

    #[test]
    fn bytes_and_str_agree_on_valid_utf8(s in hostile_string(), w in width()) {
        prop_assert_eq!(one_line_bytes(s.as_bytes(), w), one_line(&s, w));
        prop_assert_eq!(multi_line_bytes(s.as_bytes()), multi_line(&s));
    }

    #[test]
    fn printable_ascii_is_kept_as_is(s in "[ -~]{0,80}") {
        prop_assert_eq!(one_line(&s, usize::MAX), s.clone());
        prop_assert_eq!(multi_line(&s), s);
    }

    #[test]
    fn ordinary_text_is_kept_as_is(s in "[a-zA-Z0-9 .,:/é世界—ßøΩ\n-]{0,80}") {
        prop_assert_eq!(multi_line(&s), s.clone());
        prop_assert_eq!(one_line(&s, usize::MAX), s.replace('\n', ""));
    }

    #[test]
    fn run_name_validation_holds(s in hostile_string()) {
        match validate_run_name(&s) {
            Ok(None) => prop_assert!(s.trim().is_empty()),
            Ok(Some(name)) => {
                prop_assert_eq!(name.as_str(), s.trim());
                prop_assert!(name.chars().count() <= MAX_RUN_NAME_CHARS);
                prop_assert!(name.chars().all(|c| InvisibleClass::of(c).is_none()));
                // A valid name is displayed unchanged apart from the cluster cap.
                assert_safe(&name.graphemes(true).filter(|g| g.chars().count()
                    <= MAX_CLUSTER_CHARS).collect::<String>(), false);
            }
            Err(NameError::Invisible { code_point, position, class }) => {
                prop_assert_eq!(s.chars().nth(position - 1), Some(code_point));
                prop_assert_eq!(InvisibleClass::of(code_point), Some(class));
                let msg = NameError::Invisible { code_point, position, class }.to_string();
                let named = format!("U+{:04X}", u32::from(code_point));
                prop_assert!(msg.contains(&named), "{} does not name {}", msg, named);
                prop_assert!(msg.chars().all(|c| InvisibleClass::of(c).is_none()));
            }
            Err(NameError::TooLong { chars }) => {
                prop_assert!(chars > MAX_RUN_NAME_CHARS);
                prop_assert_eq!(chars, s.trim().chars().count());
            }
        }
    }
}

#[test]
fn run_name_at_and_over_the_limit() {
    let at = "n".repeat(MAX_RUN_NAME_CHARS);
    assert_eq!(validate_run_name(&at), Ok(Some(at.clone())));
    let over = "世".repeat(MAX_RUN_NAME_CHARS + 1);
    assert_eq!(
        validate_run_name(&over),
        Err(NameError::TooLong {
            chars: MAX_RUN_NAME_CHARS + 1
        })
    );
    // Grapheme clusters do not matter: 100 × (e + U+0301) is 200 characters, accepted.
    let combining = "e\u{301}".repeat(100);
    assert!(validate_run_name(&combining).is_ok());
    let combining = "e\u{301}".repeat(101);
    assert!(matches!(
        validate_run_name(&combining),
        Err(NameError::TooLong { chars: 202 })
    ));
}

#[test]
fn run_name_error_message_is_terminal_safe_and_actionable() {
    let err = validate_run_name("deploy\u{2066}\u{2069} prod").expect_err("isolate");
    let msg = err.to_string();
    assert_eq!(
        msg,
        "run name has a direction control at position 7: U+2066 LEFT-TO-RIGHT ISOLATE; \
         a name must be visible text: remove that character and send the name again"
    );
    let err = validate_run_name("x\u{e0101}").expect_err("vs");
    assert_eq!(
        err.to_string(),
        "run name has a variation selector at position 2: U+E0101 VARIATION SELECTOR-18; \
         a name must be visible text: remove that character and send the name again"
    );
    let err = validate_run_name("x\u{e0fff}").expect_err("reserved DI");
    assert!(
        err.to_string()
            .contains("default-ignorable character at position 2: U+E0FFF;")
    );
}

#[test]
fn zalgo_and_stacked_marks_are_bounded() {
    let mut s = String::new();
    for base in ['Z', 'a', 'l', 'g', 'o'] {
        s.push(base);
        s.extend(std::iter::repeat_n('\u{336}', 500));
    }
    let out = one_line(&s, usize::MAX);
    // Each letter keeps its first 15 code points (the letter and 14 marks), then `…`.
    let mut expected = String::new();
    for base in ['Z', 'a', 'l', 'g', 'o'] {
        expected.push(base);
        expected.extend(std::iter::repeat_n('\u{336}', MAX_CLUSTER_CHARS - 2));
        expected.push('…');
    }
    assert_eq!(out, expected);
    assert_safe(&out, false);
}

#[test]
fn hangul_jamo_cap_does_not_merge_clusters() {
    // 30 leading jamo then LVT, then a lone vowel jamo: the capped prefix (all L) must not
    // join the vowel after it.
    let mut s: String = std::iter::repeat_n('\u{1100}', 30).collect();
    s.push('\u{ac01}');
    s.push('\u{1161}');
    let once = multi_line(&s);
    assert_safe(&once, true);
    assert_eq!(multi_line(&once), once);
}

// ---------------------------------------------------------------------------------------------
// The attach filter (src/text/attach.rs)
// ---------------------------------------------------------------------------------------------

mod attach_filter {
    use proctor::text::attach::{AttachFilter, Clipboard};
    use proptest::prelude::*;

    /// Pieces a hostile or an ordinary program writes, whole and cut.
    const DANGEROUS: &[&[u8]] = &[
        b"\x1b]52;c;cHduZWQ=\x07",
        b"\x1b]52;c;?\x1b\\",
        b"\x1b]0;title\x07",
        b"\x1b]2;title\x1b\\",
        b"\x1b[6n",
        b"\x1b[?6n",
        b"\x1b[5n",
        b"\x1b[c",
        b"\x1b[>c",
        b"\x1b[=c",
        b"\x1b[?2004$p",
        b"\x1b[>q",
        b"\x1b[18t",
        b"\x1b[8;200;200t",
        b"\x1b[?u",
        b"\x1b]11;?\x07",
        b"\x1b]4;1;?\x07",
        b"\x1bP$qm\x1b\\",
        b"\x1bP+q544e\x1b\\",
        b"\x1b_Ga=q;AAAA\x1b\\",
        b"\x1bZ",
        b"\x05",
        b"\x9b6n",
        b"\xc2\x9b6n",
        b"\x9d52;c;eA==\x9c",
        b"\xc2\x9d2;t\xc2\x9c",
    ];
    const BENIGN: &[&[u8]] = &[
        b"hello",
        b" caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xc3\x9b",
        b"\r\n",
        b"\t",
        b"\x07",
        b"\x08",
        b"\x1b[31m",
        b"\x1b[0m",
        b"\x1b[38;2;1;2;3m",
        b"\x1b[1;1H",
        b"\x1b[2J",
        b"\x1b[K",
        b"\x1b[?1049h",
        b"\x1b[?1049l",
        b"\x1b[?2004h",
        b"\x1b[?25l",
        b"\x1b[?2026h",
        b"\x1b[5 q",
        b"\x1b[>4;2m",
        b"\x1b[>1u",
        b"\x1b7",
        b"\x1b8",
        b"\x1b(0",
        b"\x1b(B",
        b"\x1b]8;;https://example.com/a?b=c\x1b\\",
        b"\x1b]8;;\x07",
        b"\x1b]133;A\x07",
        b"\x1b]10;#ffffff\x07",
        b"\x1b]104\x1b\\",
    ];

    fn filter_all(parts: &[&[u8]], clipboard: Clipboard) -> Vec<u8> {
        let mut f = AttachFilter::new(clipboard);
        let mut out = Vec::new();
        for p in parts {
            f.push(p, &mut out);
        }
        f.finish(&mut out);
        out
    }

    /// What an emulator saw of the things attach must not pass.
    #[derive(Default)]
    struct Oracle {
        seen: Vec<String>,
    }

    impl vt100::Callbacks for Oracle {
        fn set_window_title(&mut self, _: &mut vt100::Screen, t: &[u8]) {
            self.seen.push(format!("title {t:?}"));
        }
        fn set_window_icon_name(&mut self, _: &mut vt100::Screen, t: &[u8]) {
            self.seen.push(format!("icon {t:?}"));
        }
        fn copy_to_clipboard(&mut self, _: &mut vt100::Screen, _: &[u8], d: &[u8]) {
            self.seen.push(format!("clipboard write {d:?}"));
        }
        fn paste_from_clipboard(&mut self, _: &mut vt100::Screen, _: &[u8]) {
            self.seen.push("clipboard read".into());
        }
        fn resize(&mut self, _: &mut vt100::Screen, r: (u16, u16)) {
            self.seen.push(format!("window resize {r:?}"));
        }
        fn unhandled_csi(
            &mut self,
            _: &mut vt100::Screen,
            i1: Option<u8>,
            _: Option<u8>,
            _: &[&[u16]],
            c: char,
        ) {
            let query = match c {
                'c' | 'n' | 'x' => true,
                // XTVERSION (`CSI q` alone is DECLL, the keyboard LEDs).
                'q' => i1 == Some(b'>'),
                't' => i1 != Some(b' ') && i1 != Some(b'$'),
                _ => false,
            };
            if query && !(c == 'n' && i1 == Some(b'>')) {
                self.seen.push(format!("query CSI {i1:?} {c}"));
            }
        }
        fn unhandled_osc(&mut self, _: &mut vt100::Screen, params: &[&[u8]]) {
            if params.iter().skip(1).any(|p| *p == b"?") {
                self.seen.push(format!("OSC query {params:?}"));
            }
        }
    }

    fn oracle(bytes: &[u8]) -> Vec<String> {
        let mut p = vt100::Parser::new_with_callbacks(
            std::num::NonZeroU16::new(24).unwrap(),
            std::num::NonZeroU16::new(80).unwrap(),
            0,
            Oracle::default(),
        );
        p.process(bytes);
        std::mem::take(&mut p.callbacks_mut().seen)
    }

    fn piece() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            3 => prop::sample::select(DANGEROUS).prop_map(|d| d.to_vec()),
            3 => prop::sample::select(BENIGN).prop_map(|d| d.to_vec()),
            // A piece cut short, so the next one starts inside it.
            1 => (prop::sample::select(DANGEROUS), 0usize..8)
                .prop_map(|(d, n)| d[..n.min(d.len())].to_vec()),
            1 => prop::collection::vec(any::<u8>(), 0..6),
        ]
    }

    fn stream() -> impl Strategy<Value = Vec<u8>> {
        prop::collection::vec(piece(), 0..24).prop_map(|v| v.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        /// Cut anywhere, the output is the output of the whole.
        #[test]
        fn the_output_does_not_depend_on_where_reads_end(
            s in stream(),
            cuts in prop::collection::vec(any::<prop::sample::Index>(), 0..6),
        ) {
            let whole = filter_all(&[&s], Clipboard::Drop);
            let mut at: Vec<usize> = cuts.iter().map(|i| i.index(s.len() + 1)).collect();
            at.sort_unstable();
            let mut parts: Vec<&[u8]> = Vec::new();
            let mut prev = 0;
            for a in at {
                parts.push(&s[prev..a]);
                prev = a;
            }
            parts.push(&s[prev..]);
            prop_assert_eq!(filter_all(&parts, Clipboard::Drop), whole);
        }

        /// Nothing that comes out makes an emulator set a title, touch the clipboard,
        /// resize the window or answer a query; and filtering again changes nothing.
        #[test]
        fn nothing_that_comes_out_acts_outside_the_pane(s in stream()) {
            let out = filter_all(&[&s], Clipboard::Drop);
            prop_assert_eq!(oracle(&out), Vec::<String>::new());
            for q in [&b"\x1b[6n"[..], b"\x1b[c", b"\x1b[>c", b"\x1b]52", b"\x1b]0;", b"\x1b]2;"] {
                prop_assert!(
                    !out.windows(q.len()).any(|w| w == q),
                    "{:?} in {:?}", String::from_utf8_lossy(q), String::from_utf8_lossy(&out)
                );
            }
            prop_assert_eq!(filter_all(&[&out], Clipboard::Drop), out);
        }

        /// What stays inside the pane passes byte for byte, however it is cut.
        #[test]
        fn ordinary_output_passes_unchanged(
            pieces in prop::collection::vec(prop::sample::select(BENIGN), 0..32),
            cut in any::<prop::sample::Index>(),
        ) {
            let s = pieces.concat();
            let c = cut.index(s.len() + 1);
            prop_assert_eq!(filter_all(&[&s[..c], &s[c..]], Clipboard::Drop), s.clone());
            prop_assert_eq!(filter_all(&[&s], Clipboard::Allow), s);
        }
    }

    #[test]
    fn the_oracle_sees_what_the_filter_drops() {
        // The oracle is not blind: unfiltered, it sees every kind of act the filter stops.
        let seen = oracle(&DANGEROUS.concat());
        for needle in [
            "title",
            "clipboard write",
            "clipboard read",
            "query CSI None n",
            "query CSI None c",
        ] {
            assert!(
                seen.iter().any(|s| s.starts_with(needle)),
                "{needle}: {seen:?}"
            );
        }
    }
}
