//! Terminal-safe text: the only module that decides what untrusted text may reach an
//! operator's terminal.
//!
//! Everything that did not come from the operator's own keyboard (agent output, file names,
//! ledger contents, forge fields) is printed through one of the display functions here:
//!
//! - [`one_line`] / [`one_line_bytes`]: one field on one line, capped to a display width;
//! - [`multi_line`] / [`multi_line_bytes`]: a block of text that keeps its line feeds;
//! - [`multi_line_capped`] / [`multi_line_capped_bytes`]: the same, each line capped to a width.
//!
//! Every display function applies the same rules, in this order (see `docs/security.md`,
//! "The sanitiser"):
//!
//! 1. **Escape sequences are dropped whole** (ECMA-48): CSI (`ESC [` or U+009B, parameters
//!    0x30–0x3F, intermediates 0x20–0x2F, one final 0x40–0x7E); the string sequences OSC
//!    (`ESC ]`, U+009D), DCS (`ESC P`, U+0090), SOS (`ESC X`, U+0098), PM (`ESC ^`, U+009E)
//!    and APC (`ESC _`, U+009F), which end at ST (`ESC \` or U+009C), OSC also at BEL, and
//!    which drop everything to the end of the input when unterminated; and the other ESC
//!    sequences (`ESC`, any intermediates 0x20–0x2F, one final 0x30–0x7E, e.g. `ESC 7`,
//!    `ESC ( 0`). CAN and SUB cancel a sequence; an ESC inside one ends it and starts the next,
//!    as in terminals.
//! 2. **Controls are removed**: every C0 control, DEL and every C1 control (CR, TAB and, in
//!    one-line fields, LF included; the multi-line forms keep LF and nothing else).
//! 3. **Invisible characters become visible markers**: each Bidi_Control code point, each
//!    general-category Cf character, U+2028, U+2029 and each Default_Ignorable_Code_Point is
//!    replaced by `⟨U+XXXX⟩` (at least four upper-case hex digits). The marker is made of
//!    ordinary visible characters, so a second pass leaves it alone: sanitising is idempotent.
//! 4. **A field or line never starts with a combining mark**: one that would is preceded by
//!    U+25CC DOTTED CIRCLE, so it cannot attach to the text printed before the field.
//! 5. **Grapheme clusters are capped** at [`MAX_CLUSTER_CHARS`] code points: a longer cluster
//!    keeps its first `MAX_CLUSTER_CHARS - 1` code points (its base first) followed by `…`;
//!    the rest of the cluster is dropped. Zalgo text cannot stack unbounded marks.
//! 6. **Width**: the one-line and capped forms truncate on grapheme-cluster boundaries to at
//!    most `max_width` columns (as `unicode-width` measures them), the last column being `…`
//!    when anything was cut. For this budget a cluster of width 0 counts as 1 column, so a
//!    field never holds more than `max_width` clusters. A width of 0 gives `""`; `usize::MAX`
//!    means no limit.
//!
//! [`attach`] is the other decision this module makes: which of a PTY child's escape
//! sequences may reach the operator's terminal when `proctor session attach` passes the
//! child through (clipboard writes, titles and queries whose replies would be typed into
//! the child are dropped).
//!
//! [`style`] is the third: which colours and attributes proctor may write in front of
//! sanitised text when it prints a PTY run's screen with colours (`session tail --color`);
//! it writes them itself, from structured values, and never copies the child's sequences.
//!
//! [`notification`] is the fourth: the bell and desktop-notification escape (OSC 777 or
//! OSC 9, wrapped for tmux) the cockpit writes when a run starts waiting for the person; its
//! title and body pass the one-line sanitiser and cannot end the escape early.
//!
//! Run names are not displayed text but stored data; [`validate_run_name`] refuses the same
//! invisible characters instead of marking them.

pub mod attach;
pub mod notify;
pub mod style;

pub use notify::{TermEnv, notification};

use std::fmt;
use std::iter::Peekable;

use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};
use unicode_segmentation::UnicodeSegmentation;
use unicode_width::UnicodeWidthStr;

/// The most code points one grapheme cluster keeps (see the module docs, rule 5).
pub const MAX_CLUSTER_CHARS: usize = 16;

/// The longest run name, in characters: Unicode scalar values (Rust `char`s), counted after
/// trimming. Not bytes, not grapheme clusters, not display columns.
pub const MAX_RUN_NAME_CHARS: usize = 200;

/// What marks elided text: the end of a truncated field, the tail of a capped cluster.
const ELLIPSIS: char = '\u{2026}';
/// Put in front of a combining mark that would otherwise start a field or a line.
const DOTTED_CIRCLE: char = '\u{25CC}';

const ESC: char = '\u{1b}';
const BEL: char = '\u{07}';
const CAN: char = '\u{18}';
const SUB: char = '\u{1a}';
const C1_DCS: char = '\u{90}';
const C1_SOS: char = '\u{98}';
const C1_CSI: char = '\u{9b}';
const C1_ST: char = '\u{9c}';
const C1_OSC: char = '\u{9d}';
const C1_PM: char = '\u{9e}';
const C1_APC: char = '\u{9f}';

// ---------------------------------------------------------------------------------------------
// Public display API
// ---------------------------------------------------------------------------------------------

/// One field for display on one line: escape sequences dropped, controls (LF, CR and TAB
/// included) removed, invisible characters shown as `⟨U+XXXX⟩`, grapheme clusters capped, and
/// the result at most `max_width` columns wide (ending with `…` if it was cut).
///
/// `max_width == 0` gives `""`; `usize::MAX` means no width limit.
pub fn one_line(input: &str, max_width: usize) -> String {
    // Printable ASCII is its own clean form, one column a character: only the width applies
    // (the cockpit draws most of its texts through here on every frame).
    if input.bytes().all(|b| (0x20..0x7f).contains(&b)) {
        return truncate_to_width(input.to_owned(), max_width);
    }
    one_line_chars(input.chars(), max_width)
}

/// [`one_line`] for raw bytes (agent output, file names): see [`decode`] for how bytes that
/// are not UTF-8 are read.
pub fn one_line_bytes(input: &[u8], max_width: usize) -> String {
    one_line_chars(decode(input), max_width)
}

/// A block of text for display: the rules of [`one_line`], except that LF is kept (and is the
/// only control kept; CR is removed, so CRLF becomes LF) and there is no width limit.
pub fn multi_line(input: &str) -> String {
    cap_clusters(&clean(input.chars(), true))
}

/// [`multi_line`] for raw bytes: see [`decode`] for how bytes that are not UTF-8 are read.
pub fn multi_line_bytes(input: &[u8]) -> String {
    cap_clusters(&clean(decode(input), true))
}

/// [`multi_line`] with every line truncated, like [`one_line`], to at most `max_width`
/// columns. The number of lines is unchanged.
pub fn multi_line_capped(input: &str, max_width: usize) -> String {
    capped_lines(&cap_clusters(&clean(input.chars(), true)), max_width)
}

/// [`multi_line_capped`] for raw bytes: see [`decode`] for how bytes that are not UTF-8 are
/// read.
pub fn multi_line_capped_bytes(input: &[u8], max_width: usize) -> String {
    capped_lines(&cap_clusters(&clean(decode(input), true)), max_width)
}

/// Marker that replaces an invisible character: `⟨U+202E⟩`.
pub fn marker(c: char) -> String {
    let mut out = String::with_capacity(16);
    push_marker(&mut out, c);
    out
}

fn push_marker(out: &mut String, c: char) {
    use std::fmt::Write as _;
    // Writing to a String cannot fail.
    let _ = write!(out, "\u{27e8}U+{:04X}\u{27e9}", u32::from(c));
}

fn one_line_chars(input: impl Iterator<Item = char>, max_width: usize) -> String {
    if max_width == 0 {
        return String::new();
    }
    truncate_to_width(cap_clusters(&clean(input, false)), max_width)
}

fn capped_lines(text: &str, max_width: usize) -> String {
    if max_width == usize::MAX {
        return text.to_owned();
    }
    text.split('\n')
        .map(|line| truncate_to_width(line.to_owned(), max_width))
        .collect::<Vec<_>>()
        .join("\n")
}

// ---------------------------------------------------------------------------------------------
// Decoding bytes
// ---------------------------------------------------------------------------------------------

/// Reads bytes as UTF-8, lossily, for the byte entry points.
///
/// Valid UTF-8 is read as is. A lone byte 0x80–0x9F that is not part of a UTF-8 sequence is
/// read as the 8-bit C1 control it would be to a terminal in 8-bit mode (U+0080–U+009F), so
/// that a raw `0x9B 3 1 m` is dropped whole as a CSI sequence rather than shown as `�31m`.
/// Every other invalid sequence becomes U+FFFD, as in [`String::from_utf8_lossy`].
fn decode(input: &[u8]) -> impl Iterator<Item = char> + '_ {
    input.utf8_chunks().flat_map(|chunk| {
        let invalid = chunk.invalid();
        let replacement = match invalid {
            [] => None,
            [b @ 0x80..=0x9f] => Some(char::from(*b)),
            _ => Some(char::REPLACEMENT_CHARACTER),
        };
        chunk.valid().chars().chain(replacement)
    })
}

// ---------------------------------------------------------------------------------------------
// Rules 1–4: escape sequences, controls, invisible characters, leading combining marks
// ---------------------------------------------------------------------------------------------

fn clean(input: impl Iterator<Item = char>, keep_lf: bool) -> String {
    let mut it = input.peekable();
    let mut out = String::new();
    let mut at_line_start = true;
    while let Some(c) = it.next() {
        match c {
            ESC => skip_escape(&mut it),
            C1_CSI => skip_csi(&mut it),
            C1_OSC => skip_string(&mut it, true),
            C1_DCS | C1_SOS | C1_PM | C1_APC => skip_string(&mut it, false),
            '\n' if keep_lf => {
                out.push('\n');
                at_line_start = true;
            }
            c if c.is_control() => {}
            c if is_invisible(c) => {
                push_marker(&mut out, c);
                at_line_start = false;
            }
            c => {
                if at_line_start && is_combining_mark(c) {
                    out.push(DOTTED_CIRCLE);
                }
                out.push(c);
                at_line_start = false;
            }
        }
    }
    out
}

/// After ESC: a CSI or string introducer, or an ESC sequence (intermediates, then one final).
/// A character that cannot continue the sequence is left for the caller.
fn skip_escape<I: Iterator<Item = char>>(it: &mut Peekable<I>) {
    let Some(&next) = it.peek() else { return };
    match next {
        '[' => {
            it.next();
            skip_csi(it);
        }
        ']' => {
            it.next();
            skip_string(it, true);
        }
        'P' | 'X' | '^' | '_' => {
            it.next();
            skip_string(it, false);
        }
        _ => skip_esc_sequence(it),
    }
}

/// ESC intermediates (0x20–0x2F) final (0x30–0x7E).
fn skip_esc_sequence<I: Iterator<Item = char>>(it: &mut Peekable<I>) {
    skip_until_final(it, '\u{2f}');
}

/// CSI parameters (0x30–0x3F), intermediates (0x20–0x2F), one final (0x40–0x7E).
fn skip_csi<I: Iterator<Item = char>>(it: &mut Peekable<I>) {
    skip_until_final(it, '\u{3f}');
}

/// Skips a sequence whose body is 0x20..=`body_max` and whose final is the next character
/// up to 0x7E. C0 controls other than ESC, CAN and SUB, and DEL, are ignored inside the
/// sequence, as terminals do; CAN and SUB cancel it; ESC or any other character ends it and
/// is left for the caller.
fn skip_until_final<I: Iterator<Item = char>>(it: &mut Peekable<I>, body_max: char) {
    while let Some(&c) = it.peek() {
        if ('\u{20}'..=body_max).contains(&c) {
            it.next();
        } else if (c > body_max && c <= '\u{7e}') || c == CAN || c == SUB {
            it.next();
            return;
        } else if c == ESC {
            return;
        } else if c <= '\u{1f}' || c == '\u{7f}' {
            it.next();
        } else {
            return;
        }
    }
}

/// A string sequence (OSC, DCS, SOS, PM, APC) up to and including ST (`ESC \` or U+009C), or
/// BEL for OSC. CAN and SUB cancel it. An ESC not followed by `\` ends it and starts the next
/// sequence. Unterminated, it runs to the end of the input.
fn skip_string<I: Iterator<Item = char>>(it: &mut Peekable<I>, bel_ends: bool) {
    while let Some(c) = it.next() {
        match c {
            C1_ST | CAN | SUB => return,
            BEL if bel_ends => return,
            ESC => {
                if it.peek() == Some(&'\\') {
                    it.next();
                } else {
                    skip_escape(it);
                }
                return;
            }
            _ => {}
        }
    }
}

fn is_combining_mark(c: char) -> bool {
    // ASCII is never a mark; skip the table look-up for the common case.
    !c.is_ascii()
        && matches!(
            c.general_category(),
            GeneralCategory::NonspacingMark
                | GeneralCategory::SpacingMark
                | GeneralCategory::EnclosingMark
        )
}

// ---------------------------------------------------------------------------------------------
// Character classes
// ---------------------------------------------------------------------------------------------

/// The 12 Bidi_Control code points: the nine explicit formatting characters, by their
/// bidirectional class (`unicode-bidi`'s UAX #9 tables: LRE, RLE, PDF, LRO, RLO, LRI, RLI,
/// FSI, PDI), and the three implicit marks, whose classes are ordinary strong ones (ALM is
/// AL, LRM is L, RLM is R) and which are therefore named.
pub fn is_bidi_control(c: char) -> bool {
    use unicode_bidi::BidiClass::{FSI, LRE, LRI, LRO, PDF, PDI, RLE, RLI, RLO};
    matches!(
        unicode_bidi::bidi_class(c),
        LRE | RLE | PDF | LRO | RLO | LRI | RLI | FSI | PDI
    ) || matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}')
}

/// Default_Ignorable_Code_Point, from DerivedCoreProperties.txt of Unicode 15.0.0 (checked
/// against that file by `tests/text.rs`; sorted, inclusive ranges).
const DEFAULT_IGNORABLE: &[(u32, u32)] = &[
    (0x00AD, 0x00AD),   // SOFT HYPHEN
    (0x034F, 0x034F),   // COMBINING GRAPHEME JOINER
    (0x061C, 0x061C),   // ARABIC LETTER MARK
    (0x115F, 0x1160),   // HANGUL CHOSEONG FILLER..HANGUL JUNGSEONG FILLER
    (0x17B4, 0x17B5),   // KHMER VOWEL INHERENT AQ..KHMER VOWEL INHERENT AA
    (0x180B, 0x180D),   // MONGOLIAN FREE VARIATION SELECTOR ONE..THREE
    (0x180E, 0x180E),   // MONGOLIAN VOWEL SEPARATOR
    (0x180F, 0x180F),   // MONGOLIAN FREE VARIATION SELECTOR FOUR
    (0x200B, 0x200F),   // ZERO WIDTH SPACE..RIGHT-TO-LEFT MARK
    (0x202A, 0x202E),   // LEFT-TO-RIGHT EMBEDDING..RIGHT-TO-LEFT OVERRIDE
    (0x2060, 0x2064),   // WORD JOINER..INVISIBLE PLUS
    (0x2065, 0x2065),   // <reserved-2065>
    (0x2066, 0x206F),   // LEFT-TO-RIGHT ISOLATE..NOMINAL DIGIT SHAPES
    (0x3164, 0x3164),   // HANGUL FILLER
    (0xFE00, 0xFE0F),   // VARIATION SELECTOR-1..VARIATION SELECTOR-16
    (0xFEFF, 0xFEFF),   // ZERO WIDTH NO-BREAK SPACE
    (0xFFA0, 0xFFA0),   // HALFWIDTH HANGUL FILLER
    (0xFFF0, 0xFFF8),   // <reserved-FFF0>..<reserved-FFF8>
    (0x1BCA0, 0x1BCA3), // SHORTHAND FORMAT LETTER OVERLAP..SHORTHAND FORMAT UP STEP
    (0x1D173, 0x1D17A), // MUSICAL SYMBOL BEGIN BEAM..MUSICAL SYMBOL END PHRASE
    (0xE0000, 0xE0000), // <reserved-E0000>
    (0xE0001, 0xE0001), // LANGUAGE TAG
    (0xE0002, 0xE001F), // <reserved-E0002>..<reserved-E001F>
    (0xE0020, 0xE007F), // TAG SPACE..CANCEL TAG
    (0xE0080, 0xE00FF), // <reserved-E0080>..<reserved-E00FF>
    (0xE0100, 0xE01EF), // VARIATION SELECTOR-17..VARIATION SELECTOR-256
    (0xE01F0, 0xE0FFF), // <reserved-E01F0>..<reserved-E0FFF>
];

/// Default_Ignorable_Code_Point (Unicode 15.0.0): variation selectors, tag characters, Hangul
/// fillers, zero-width characters, and the reserved code points that will stay invisible.
pub fn is_default_ignorable(c: char) -> bool {
    let cp = u32::from(c);
    if cp < 0xAD {
        return false;
    }
    DEFAULT_IGNORABLE
        .binary_search_by(|&(lo, hi)| {
            if hi < cp {
                std::cmp::Ordering::Less
            } else if lo > cp {
                std::cmp::Ordering::Greater
            } else {
                std::cmp::Ordering::Equal
            }
        })
        .is_ok()
}

/// The characters the display functions replace with a marker: Bidi_Control, general category
/// Cf, U+2028 LINE SEPARATOR, U+2029 PARAGRAPH SEPARATOR and Default_Ignorable_Code_Point.
/// (Controls, general category Cc, are not in this class: they are removed.)
pub fn is_invisible(c: char) -> bool {
    if c.is_ascii() {
        return false;
    }
    matches!(c, '\u{2028}' | '\u{2029}')
        || is_bidi_control(c)
        || is_default_ignorable(c)
        || c.general_category() == GeneralCategory::Format
}

/// Why a character is refused in a run name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InvisibleClass {
    /// General category Cc: C0 controls, DEL, C1 controls.
    Control,
    /// One of the 12 Bidi_Control code points (marks, embeddings, overrides, isolates).
    DirectionControl,
    /// U+2028 LINE SEPARATOR.
    LineSeparator,
    /// U+2029 PARAGRAPH SEPARATOR.
    ParagraphSeparator,
    /// U+200B–U+200D, U+2060, U+FEFF.
    ZeroWidth,
    /// U+FE00–U+FE0F, U+E0100–U+E01EF, and the Mongolian free variation selectors.
    VariationSelector,
    /// U+E0000–U+E007F.
    Tag,
    /// U+115F, U+1160, U+3164, U+FFA0.
    HangulFiller,
    /// Any other general-category Cf character.
    Format,
    /// Any other Default_Ignorable_Code_Point (reserved ones included).
    DefaultIgnorable,
}

impl InvisibleClass {
    /// The class of `c`, or `None` if `c` is neither a control nor invisible.
    pub fn of(c: char) -> Option<InvisibleClass> {
        if c.is_control() {
            return Some(InvisibleClass::Control);
        }
        if !is_invisible(c) {
            return None;
        }
        Some(match c {
            c if is_bidi_control(c) => InvisibleClass::DirectionControl,
            '\u{2028}' => InvisibleClass::LineSeparator,
            '\u{2029}' => InvisibleClass::ParagraphSeparator,
            '\u{200b}'..='\u{200d}' | '\u{2060}' | '\u{feff}' => InvisibleClass::ZeroWidth,
            '\u{fe00}'..='\u{fe0f}'
            | '\u{e0100}'..='\u{e01ef}'
            | '\u{180b}'..='\u{180d}'
            | '\u{180f}' => InvisibleClass::VariationSelector,
            '\u{e0000}'..='\u{e007f}' => InvisibleClass::Tag,
            '\u{115f}' | '\u{1160}' | '\u{3164}' | '\u{ffa0}' => InvisibleClass::HangulFiller,
            c if c.general_category() == GeneralCategory::Format => InvisibleClass::Format,
            _ => InvisibleClass::DefaultIgnorable,
        })
    }
}

impl fmt::Display for InvisibleClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            InvisibleClass::Control => "control character",
            InvisibleClass::DirectionControl => "direction control",
            InvisibleClass::LineSeparator => "line separator",
            InvisibleClass::ParagraphSeparator => "paragraph separator",
            InvisibleClass::ZeroWidth => "zero-width character",
            InvisibleClass::VariationSelector => "variation selector",
            InvisibleClass::Tag => "tag character",
            InvisibleClass::HangulFiller => "Hangul filler",
            InvisibleClass::Format => "format character",
            InvisibleClass::DefaultIgnorable => "default-ignorable character",
        })
    }
}

/// The Unicode name of the controls and invisible characters an attacker is most likely to
/// use, for error messages; `None` for the others (the class still names them).
pub fn known_name(c: char) -> Option<String> {
    let name = match c {
        '\u{00}' => "NULL",
        '\u{07}' => "ALERT",
        '\u{08}' => "BACKSPACE",
        '\u{09}' => "CHARACTER TABULATION",
        '\u{0a}' => "LINE FEED",
        '\u{0b}' => "LINE TABULATION",
        '\u{0c}' => "FORM FEED",
        '\u{0d}' => "CARRIAGE RETURN",
        '\u{1b}' => "ESCAPE",
        '\u{7f}' => "DELETE",
        '\u{85}' => "NEXT LINE",
        '\u{9b}' => "CONTROL SEQUENCE INTRODUCER",
        '\u{9d}' => "OPERATING SYSTEM COMMAND",
        '\u{ad}' => "SOFT HYPHEN",
        '\u{34f}' => "COMBINING GRAPHEME JOINER",
        '\u{61c}' => "ARABIC LETTER MARK",
        '\u{115f}' => "HANGUL CHOSEONG FILLER",
        '\u{1160}' => "HANGUL JUNGSEONG FILLER",
        '\u{180e}' => "MONGOLIAN VOWEL SEPARATOR",
        '\u{200b}' => "ZERO WIDTH SPACE",
        '\u{200c}' => "ZERO WIDTH NON-JOINER",
        '\u{200d}' => "ZERO WIDTH JOINER",
        '\u{200e}' => "LEFT-TO-RIGHT MARK",
        '\u{200f}' => "RIGHT-TO-LEFT MARK",
        '\u{2028}' => "LINE SEPARATOR",
        '\u{2029}' => "PARAGRAPH SEPARATOR",
        '\u{202a}' => "LEFT-TO-RIGHT EMBEDDING",
        '\u{202b}' => "RIGHT-TO-LEFT EMBEDDING",
        '\u{202c}' => "POP DIRECTIONAL FORMATTING",
        '\u{202d}' => "LEFT-TO-RIGHT OVERRIDE",
        '\u{202e}' => "RIGHT-TO-LEFT OVERRIDE",
        '\u{2060}' => "WORD JOINER",
        '\u{2066}' => "LEFT-TO-RIGHT ISOLATE",
        '\u{2067}' => "RIGHT-TO-LEFT ISOLATE",
        '\u{2068}' => "FIRST STRONG ISOLATE",
        '\u{2069}' => "POP DIRECTIONAL ISOLATE",
        '\u{3164}' => "HANGUL FILLER",
        '\u{feff}' => "ZERO WIDTH NO-BREAK SPACE",
        '\u{ffa0}' => "HALFWIDTH HANGUL FILLER",
        '\u{e0001}' => "LANGUAGE TAG",
        '\u{e007f}' => "CANCEL TAG",
        '\u{fe00}'..='\u{fe0f}' => {
            return Some(format!("VARIATION SELECTOR-{}", u32::from(c) - 0xfe00 + 1));
        }
        '\u{e0100}'..='\u{e01ef}' => {
            return Some(format!(
                "VARIATION SELECTOR-{}",
                u32::from(c) - 0xe0100 + 17
            ));
        }
        '\u{e0020}' => "TAG SPACE",
        '\u{e0030}'..='\u{e0039}' => {
            const DIGITS: [&str; 10] = [
                "ZERO", "ONE", "TWO", "THREE", "FOUR", "FIVE", "SIX", "SEVEN", "EIGHT", "NINE",
            ];
            let digit = DIGITS[(u32::from(c) - 0xe0030) as usize];
            return Some(format!("TAG DIGIT {digit}"));
        }
        '\u{e0041}'..='\u{e005a}' | '\u{e0061}'..='\u{e007a}' => {
            let ascii = char::from_u32(u32::from(c) - 0xe0000).map_or('?', |a| a);
            let case = if ascii.is_ascii_uppercase() {
                "CAPITAL"
            } else {
                "SMALL"
            };
            let letter = ascii.to_ascii_uppercase();
            return Some(format!("TAG LATIN {case} LETTER {letter}"));
        }
        _ => return None,
    };
    Some(name.to_owned())
}

// ---------------------------------------------------------------------------------------------
// Rules 5–6: grapheme cap and width
// ---------------------------------------------------------------------------------------------

/// Caps every grapheme cluster at [`MAX_CLUSTER_CHARS`] code points: a longer one keeps its
/// first `MAX_CLUSTER_CHARS - 1` and ends with `…`.
///
/// The `…` (general category Po, grapheme break property Other) also guarantees that the kept
/// prefix cannot join the cluster after it (a prefix ending in a Prepend character or a Hangul
/// leading jamo could otherwise merge with the next cluster), so a second pass finds nothing
/// to cap.
fn cap_clusters(text: &str) -> String {
    // Clean ASCII has no CR, so each of its clusters is one character.
    if text.is_ascii() {
        return text.to_owned();
    }
    let mut out = String::with_capacity(text.len());
    for g in text.graphemes(true) {
        // Each char is at least one byte: a short cluster needs no counting.
        if g.len() <= MAX_CLUSTER_CHARS || g.chars().count() <= MAX_CLUSTER_CHARS {
            out.push_str(g);
        } else {
            out.extend(g.chars().take(MAX_CLUSTER_CHARS - 1));
            out.push(ELLIPSIS);
        }
    }
    out
}

/// Columns a cluster takes from the width budget: its `unicode-width` width, but at least 1,
/// so that zero-width clusters (a lone Hangul vowel jamo, for one) cannot make a width-capped
/// field arbitrarily long: a field of width `w` holds at most `w` clusters.
fn cluster_columns(g: &str) -> usize {
    g.width().max(1)
}

/// Whether clean text fits in `max_width`: its `unicode-width` width and the sum of its
/// clusters' [`cluster_columns`] are both at most `max_width`.
fn fits(text: &str, max_width: usize) -> bool {
    if text.is_ascii() {
        // Clean ASCII is printable: one column per byte.
        return text.len() <= max_width;
    }
    text.width() <= max_width
        && text
            .graphemes(true)
            .try_fold(0usize, |used, g| {
                let used = used.saturating_add(cluster_columns(g));
                (used <= max_width).then_some(used)
            })
            .is_some()
}

/// Truncates already-clean text to `max_width` columns on a grapheme boundary, ending with
/// `…` when anything was cut.
fn truncate_to_width(text: String, max_width: usize) -> String {
    if max_width == 0 {
        return String::new();
    }
    if max_width == usize::MAX || fits(&text, max_width) {
        return text;
    }
    if text.is_ascii() {
        let mut out = String::with_capacity(max_width + ELLIPSIS.len_utf8());
        out.push_str(&text[..max_width - 1]);
        out.push(ELLIPSIS);
        return out;
    }
    // Keep whole clusters while they fit in max_width - 1 columns, leaving one for the `…`.
    let budget = max_width - 1;
    let mut used = 0usize;
    let mut ends = vec![0usize];
    for (start, g) in text.grapheme_indices(true) {
        used = used.saturating_add(cluster_columns(g));
        if used > budget {
            break;
        }
        ends.push(start + g.len());
    }
    // unicode-width measures some sequences (ligatures, emoji) differently as a whole than as
    // separate clusters, and a kept prefix ending in a Prepend character joins the `…`: check
    // the result as a second pass would, and drop clusters until it passes. Rarely loops.
    while let Some(end) = ends.pop() {
        let mut out = String::with_capacity(end + ELLIPSIS.len_utf8());
        out.push_str(&text[..end]);
        out.push(ELLIPSIS);
        let last_ok = out
            .graphemes(true)
            .next_back()
            .is_none_or(|g| g.chars().count() <= MAX_CLUSTER_CHARS);
        if last_ok && fits(&out, max_width) {
            return out;
        }
    }
    // `…` alone is one column wide and max_width >= 1.
    ELLIPSIS.to_string()
}

// ---------------------------------------------------------------------------------------------
// Run names
// ---------------------------------------------------------------------------------------------

/// Why a run name was refused. The message names the problem and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// More than [`MAX_RUN_NAME_CHARS`] characters after trimming.
    #[error(
        "run name is {chars} characters long after trimming; the limit is {MAX_RUN_NAME_CHARS} \
         characters (Unicode scalar values): shorten the name and send it again"
    )]
    TooLong {
        /// Characters (Unicode scalar values) in the trimmed name.
        chars: usize,
    },
    /// A control or invisible character.
    #[error(
        "run name has a {class} at position {position}: {}; a name must be visible text: \
         remove that character and send the name again",
        describe(*code_point)
    )]
    Invisible {
        /// The refused character.
        code_point: char,
        /// Its class.
        class: InvisibleClass,
        /// Its position in the name as sent, in characters, counting from 1.
        position: usize,
    },
}

/// `U+202E RIGHT-TO-LEFT OVERRIDE`, or `U+E0100` when no name is known. Never the character
/// itself.
fn describe(c: char) -> String {
    match known_name(c) {
        Some(name) => format!("U+{:04X} {name}", u32::from(c)),
        None => format!("U+{:04X}", u32::from(c)),
    }
}

/// Validates a run name (seed 002, `PUT /runs/{ref}/name`).
///
/// The name is trimmed (Unicode White_Space at both ends). An empty result is `Ok(None)`:
/// clear the name, clients fall back to their own naming. Otherwise it is refused if it holds
/// a control character (general category Cc) or an invisible character ([`is_invisible`]:
/// Bidi_Control, Cf, U+2028, U+2029, Default_Ignorable_Code_Point), reporting the first one
/// with its position in the name as sent; or if it is longer than [`MAX_RUN_NAME_CHARS`]
/// characters, counted as Unicode scalar values (`char`s) after trimming.
pub fn validate_run_name(name: &str) -> Result<Option<String>, NameError> {
    let trimmed = name.trim();
    if trimmed.is_empty() {
        return Ok(None);
    }
    let lead = name[..name.len() - name.trim_start().len()].chars().count();
    if let Some((i, c, class)) = trimmed
        .chars()
        .enumerate()
        .find_map(|(i, c)| InvisibleClass::of(c).map(|class| (i, c, class)))
    {
        return Err(NameError::Invisible {
            code_point: c,
            class,
            position: lead + i + 1,
        });
    }
    let chars = trimmed.chars().count();
    if chars > MAX_RUN_NAME_CHARS {
        return Err(NameError::TooLong { chars });
    }
    Ok(Some(trimmed.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_lines_ascii_shortcut_gives_what_the_whole_sanitiser_gives() {
        // Every printable ASCII character, alone and in strings of every length around the
        // widths asked, plus the controls just outside the range (which take the long way).
        let printable: String = (0x20u8..0x7f).map(char::from).collect();
        let mut inputs: Vec<String> = printable.chars().map(String::from).collect();
        inputs.push(String::new());
        inputs.push(printable.clone());
        let mut x: u32 = 7;
        for len in 0..40 {
            let s: String = (0..len)
                .map(|_| {
                    x = x.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                    char::from(0x20 + ((x >> 16) % 95) as u8)
                })
                .collect();
            inputs.push(s);
        }
        inputs.push("tab\there".into());
        inputs.push("del\u{7f}".into());
        inputs.push("esc\u{1b}[31mred".into());
        for s in &inputs {
            for w in (0..s.len() + 3).chain([usize::MAX]) {
                assert_eq!(
                    one_line(s, w),
                    one_line_chars(s.chars(), w),
                    "{s:?} at width {w}"
                );
            }
        }
    }

    #[test]
    fn plain_text_is_unchanged() {
        assert_eq!(one_line("hello, world", 80), "hello, world");
        assert_eq!(multi_line("a\nb"), "a\nb");
        assert_eq!(one_line("héllo 世界", usize::MAX), "héllo 世界");
    }

    #[test]
    fn controls_are_removed_one_line() {
        assert_eq!(one_line("a\tb\r\nc\u{0}d\u{7f}e\u{85}f", 80), "abcdef");
    }

    #[test]
    fn multi_line_keeps_lf_only() {
        assert_eq!(multi_line("a\r\nb\tc\rd\n"), "a\nbcd\n");
    }

    #[test]
    fn csi_dropped_whole() {
        assert_eq!(one_line("\x1b[1;31mred\x1b[0m", 80), "red");
        assert_eq!(one_line("\u{9b}2Jx", 80), "x");
        assert_eq!(one_line("\x1b[?1049h", 80), "");
        // A C0 control inside a CSI is ignored and the sequence goes on.
        assert_eq!(one_line("\x1b[3\n1mX", 80), "X");
        // CAN cancels.
        assert_eq!(one_line("\x1b[3\x18mX", 80), "mX");
        // A non-ASCII character ends a malformed CSI and is kept.
        assert_eq!(one_line("\x1b[3éX", 80), "éX");
        // Unterminated at the end.
        assert_eq!(one_line("ok\x1b[12;", 80), "ok");
    }

    #[test]
    fn string_sequences_dropped_whole() {
        assert_eq!(one_line("a\x1b]0;title\x07b", 80), "ab");
        assert_eq!(one_line("a\x1b]0;title\x1b\\b", 80), "ab");
        assert_eq!(one_line("a\u{9d}0;title\u{9c}b", 80), "ab");
        assert_eq!(one_line("a\x1bPq#0\x1b\\b", 80), "ab");
        // BEL does not end a DCS.
        assert_eq!(one_line("a\x1bPx\x07y\x1b\\b", 80), "ab");
        assert_eq!(
            one_line("a\x1bXsos\x1b\\b\x1b^pm\x1b\\c\x1b_apc\x1b\\d", 80),
            "abcd"
        );
        // Unterminated: everything to the end is dropped.
        assert_eq!(one_line("a\x1b]0;never ends", 80), "a");
        assert_eq!(one_line("a\x1bPnever ends", 80), "a");
        // An ESC that is not ST ends the string and starts the next sequence.
        assert_eq!(one_line("a\x1b]0;t\x1b[31mb", 80), "ab");
    }

    #[test]
    fn esc_sequences_dropped_whole() {
        assert_eq!(one_line("a\x1b7b\x1b8c", 80), "abc");
        assert_eq!(one_line("\x1b(0lqk\x1b(B", 80), "lqk");
        assert_eq!(one_line("\x1b#8x", 80), "x");
        assert_eq!(one_line("x\x1bc", 80), "x");
        // ESC followed by a non-ASCII character: only the ESC goes.
        assert_eq!(one_line("\x1bé", 80), "é");
        assert_eq!(one_line("end\x1b", 80), "end");
    }

    #[test]
    fn raw_c1_bytes_are_read_as_controls() {
        assert_eq!(one_line_bytes(b"a\x9b31mb", 80), "ab");
        assert_eq!(one_line_bytes(b"a\x9d0;t\x9cb", 80), "ab");
        assert_eq!(one_line_bytes(b"a\x9d0;t\x07b", 80), "ab");
        // Other invalid bytes become U+FFFD.
        assert_eq!(one_line_bytes(b"a\xffb\xe2\x82", 80), "a\u{fffd}b\u{fffd}");
        assert_eq!(one_line_bytes(b"\xa0", 80), "\u{fffd}");
        assert_eq!(multi_line_bytes(b"x\r\ny\x1b[K"), "x\ny");
    }

    #[test]
    fn invisible_characters_get_markers() {
        assert_eq!(one_line("a\u{202e}b", 80), "a⟨U+202E⟩b");
        assert_eq!(one_line("\u{200b}", 80), "⟨U+200B⟩");
        assert_eq!(one_line("x\u{e0100}", 80), "x⟨U+E0100⟩");
        assert_eq!(one_line("\u{3164}", 80), "⟨U+3164⟩");
        assert_eq!(multi_line("a\u{2028}b\u{2029}c"), "a⟨U+2028⟩b⟨U+2029⟩c");
        assert_eq!(one_line("\u{ad}\u{feff}", 80), "⟨U+00AD⟩⟨U+FEFF⟩");
        // Cf without Default_Ignorable: ARABIC NUMBER SIGN.
        assert_eq!(one_line("\u{600}1", 80), "⟨U+0600⟩1");
    }

    #[test]
    fn every_bidi_control_is_marked() {
        let all = [
            0x061c, 0x200e, 0x200f, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e, 0x2066, 0x2067, 0x2068,
            0x2069,
        ];
        let count = (0..=0x10ffffu32)
            .filter_map(char::from_u32)
            .filter(|&c| is_bidi_control(c))
            .count();
        assert_eq!(count, 12);
        for cp in all {
            let c = char::from_u32(cp).expect("valid");
            assert!(is_bidi_control(c));
            assert_eq!(one_line(&c.to_string(), 80), format!("⟨U+{cp:04X}⟩"));
        }
    }

    #[test]
    fn default_ignorable_table_is_sorted_and_counts_4174() {
        assert!(DEFAULT_IGNORABLE.windows(2).all(|w| w[0].1 < w[1].0));
        assert!(DEFAULT_IGNORABLE.iter().all(|&(lo, hi)| lo <= hi));
        let n: u32 = DEFAULT_IGNORABLE.iter().map(|&(lo, hi)| hi - lo + 1).sum();
        assert_eq!(n, 4174);
        for cp in [
            0x115f, 0x1160, 0x3164, 0xffa0, 0xfe0f, 0xe0100, 0xe0fff, 0x180f, 0x34f,
        ] {
            assert!(
                is_default_ignorable(char::from_u32(cp).expect("valid")),
                "{cp:X}"
            );
        }
        for c in ['a', ' ', '\u{ac}', '\u{ae}', '\u{e1000}', '\u{fe10}'] {
            assert!(!is_default_ignorable(c), "{c:?}");
        }
    }

    #[test]
    fn markers_survive_a_second_pass() {
        let once = one_line("\u{202e}x\u{fe0f}\u{e0041}", 80);
        assert_eq!(once, "⟨U+202E⟩x⟨U+FE0F⟩⟨U+E0041⟩");
        assert_eq!(one_line(&once, 80), once);
    }

    #[test]
    fn leading_combining_mark_gets_a_dotted_circle() {
        assert_eq!(one_line("\u{301}x", 80), "\u{25cc}\u{301}x");
        assert_eq!(multi_line("a\n\u{301}b"), "a\n\u{25cc}\u{301}b");
        assert_eq!(one_line("e\u{301}", 80), "e\u{301}");
        // After a dropped escape sequence at the start, still the start.
        assert_eq!(one_line("\x1b[0m\u{301}", 80), "\u{25cc}\u{301}");
    }

    #[test]
    fn zalgo_is_capped() {
        let zalgo: String = std::iter::once('Z')
            .chain(std::iter::repeat_n('\u{336}', 100))
            .collect();
        let out = one_line(&zalgo, 80);
        let expected: String = std::iter::once('Z')
            .chain(std::iter::repeat_n('\u{336}', MAX_CLUSTER_CHARS - 2))
            .chain(std::iter::once('…'))
            .collect();
        assert_eq!(out, expected);
        assert_eq!(one_line(&out, 80), out);
        // Exactly MAX_CLUSTER_CHARS is kept whole.
        let exact: String = std::iter::once('a')
            .chain(std::iter::repeat_n('\u{301}', MAX_CLUSTER_CHARS - 1))
            .collect();
        assert_eq!(one_line(&exact, 80), exact);
    }

    #[test]
    fn capped_prepend_prefix_does_not_merge_with_next_cluster() {
        // U+0D4E MALAYALAM LETTER DOT REPH is Prepend: 20 of them and a base form one cluster.
        let s: String = std::iter::repeat_n('\u{d4e}', 20)
            .chain("ka".chars())
            .collect();
        let once = one_line(&s, usize::MAX);
        assert!(
            once.graphemes(true)
                .all(|g| g.chars().count() <= MAX_CLUSTER_CHARS)
        );
        assert_eq!(one_line(&once, usize::MAX), once);
    }

    #[test]
    fn width_truncation() {
        assert_eq!(one_line("abcdef", 0), "");
        assert_eq!(one_line("abcdef", 1), "…");
        assert_eq!(one_line("abcdef", 4), "abc…");
        assert_eq!(one_line("abcdef", 6), "abcdef");
        // Wide characters are never split; the cut lands on a cluster boundary.
        assert_eq!(one_line("世界世界", 4), "世…");
        assert_eq!(one_line("世界世界", 5), "世界…");
        assert_eq!(one_line("e\u{301}e\u{301}e\u{301}", 2), "e\u{301}…");
        // Markers count for their width like any other text.
        assert_eq!(one_line("\u{202e}abc", 5), "⟨U+2…");
    }

    #[test]
    fn zero_width_clusters_count_as_one_column() {
        // Lone Hangul vowel + final jamo: clusters of width 0.
        let s = "\u{1161}\u{11a8}".repeat(1000);
        let out = one_line(&s, 10);
        assert_eq!(out.graphemes(true).count(), 10);
        assert!(out.ends_with('…'));
        assert_eq!(one_line(&out, 10), out);
    }

    #[test]
    fn capped_multi_line() {
        assert_eq!(
            multi_line_capped("abcdef\nxy\n\u{1b}[2Jlonger", 4),
            "abc…\nxy\nlon…"
        );
        assert_eq!(multi_line_capped("a\nb", 0), "\n");
        assert_eq!(
            multi_line_capped_bytes(b"a\x9b2Jbc\r\nd", usize::MAX),
            "abc\nd"
        );
    }

    #[test]
    fn run_name_trimmed_and_cleared() {
        assert_eq!(
            validate_run_name("  fix the parser \n"),
            Ok(Some("fix the parser".into()))
        );
        assert_eq!(validate_run_name(""), Ok(None));
        assert_eq!(validate_run_name(" \t\n "), Ok(None));
        assert_eq!(
            validate_run_name("Café 世界 🚀"),
            Ok(Some("Café 世界 🚀".into()))
        );
    }

    #[test]
    fn run_name_length_is_in_chars() {
        let ok = "é".repeat(200);
        assert_eq!(validate_run_name(&ok), Ok(Some(ok.clone())));
        let long = "é".repeat(201);
        let err = validate_run_name(&long).expect_err("too long");
        assert_eq!(err, NameError::TooLong { chars: 201 });
        assert!(err.to_string().contains("201 characters"));
        assert!(err.to_string().contains("limit is 200"));
        // Surrounding whitespace does not count.
        assert!(validate_run_name(&format!("  {ok}  ")).is_ok());
    }

    #[test]
    fn run_name_refuses_invisible_with_position() {
        let err = validate_run_name("  ab\u{202e}cd").expect_err("bidi");
        assert_eq!(
            err,
            NameError::Invisible {
                code_point: '\u{202e}',
                class: InvisibleClass::DirectionControl,
                position: 5,
            }
        );
        let msg = err.to_string();
        assert!(msg.contains("U+202E RIGHT-TO-LEFT OVERRIDE"), "{msg}");
        assert!(msg.contains("direction control"), "{msg}");
        assert!(msg.contains("position 5"), "{msg}");
        assert!(msg.contains("remove that character"), "{msg}");
        assert!(!msg.contains('\u{202e}'));

        let cases = [
            ("a\u{200b}b", InvisibleClass::ZeroWidth, 2),
            ("a\u{2028}b", InvisibleClass::LineSeparator, 2),
            ("a\u{2029}b", InvisibleClass::ParagraphSeparator, 2),
            ("a\tb", InvisibleClass::Control, 2),
            ("a\u{1b}[31mb", InvisibleClass::Control, 2),
            ("a\u{9b}b", InvisibleClass::Control, 2),
            ("ok\u{fe0f}", InvisibleClass::VariationSelector, 3),
            ("ok\u{e0100}", InvisibleClass::VariationSelector, 3),
            ("x\u{e0041}", InvisibleClass::Tag, 2),
            ("\u{3164}", InvisibleClass::HangulFiller, 1),
            ("a\u{ad}", InvisibleClass::Format, 2),
            ("a\u{34f}", InvisibleClass::DefaultIgnorable, 2),
            ("a\u{600}", InvisibleClass::Format, 2),
            ("a\u{2065}", InvisibleClass::DefaultIgnorable, 2),
        ];
        for (name, class, position) in cases {
            match validate_run_name(name) {
                Err(NameError::Invisible {
                    class: k,
                    position: p,
                    ..
                }) => {
                    assert_eq!((k, p), (class, position), "{name:?}");
                }
                other => panic!("{name:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn known_names() {
        assert_eq!(
            known_name('\u{fe0f}').as_deref(),
            Some("VARIATION SELECTOR-16")
        );
        assert_eq!(
            known_name('\u{e0100}').as_deref(),
            Some("VARIATION SELECTOR-17")
        );
        assert_eq!(
            known_name('\u{e01ef}').as_deref(),
            Some("VARIATION SELECTOR-256")
        );
        assert_eq!(
            known_name('\u{e0061}').as_deref(),
            Some("TAG LATIN SMALL LETTER A")
        );
        assert_eq!(
            known_name('\u{e005a}').as_deref(),
            Some("TAG LATIN CAPITAL LETTER Z")
        );
        assert_eq!(known_name('\u{e0037}').as_deref(), Some("TAG DIGIT SEVEN"));
        assert_eq!(known_name('\u{e0021}'), None);
        assert_eq!(known_name('\u{e0020}').as_deref(), Some("TAG SPACE"));
        assert_eq!(known_name('a'), None);
    }
}
