//! Fuzzes `proctor::text` with the invariants of `tests/text.rs`: whatever the bytes, the
//! output holds no control (LF only in the multi-line forms), no Bidi_Control, Cf,
//! Default_Ignorable, U+2028 or U+2029; no grapheme cluster over the cap; never exceeds the
//! width; and a second pass changes nothing.
//!
//! Input: the first byte chooses the width (255 = no limit), the rest is the text.

#![no_main]

use libfuzzer_sys::fuzz_target;
use proctor::text::{self, InvisibleClass, MAX_CLUSTER_CHARS, NameError};
use unicode_segmentation::UnicodeSegmentation;
use unicode_width::UnicodeWidthStr;

fn assert_safe(out: &str, allow_lf: bool) {
    for c in out.chars() {
        assert!(
            !c.is_control() || (allow_lf && c == '\n'),
            "control {c:?} in {out:?}"
        );
        assert!(!text::is_invisible(c), "invisible {c:?} in {out:?}");
        assert!(!text::is_bidi_control(c), "bidi {c:?} in {out:?}");
        assert!(!text::is_default_ignorable(c), "DI {c:?} in {out:?}");
    }
    for g in out.graphemes(true) {
        assert!(
            g.chars().count() <= MAX_CLUSTER_CHARS,
            "cluster {g:?} in {out:?}"
        );
    }
}

fn assert_width(out: &str, width: usize) {
    assert!(
        width == usize::MAX || out.width() <= width,
        "{out:?} wider than {width}"
    );
}

fuzz_target!(|data: &[u8]| {
    let Some((&w, bytes)) = data.split_first() else {
        return;
    };
    let width = if w == 255 { usize::MAX } else { usize::from(w) };

    let one = text::one_line_bytes(bytes, width);
    assert_safe(&one, false);
    assert_width(&one, width);
    assert_eq!(text::one_line(&one, width), one, "one_line not idempotent");

    let multi = text::multi_line_bytes(bytes);
    assert_safe(&multi, true);
    assert_eq!(text::multi_line(&multi), multi, "multi_line not idempotent");

    let capped = text::multi_line_capped_bytes(bytes, width);
    assert_safe(&capped, true);
    for line in capped.split('\n') {
        assert_width(line, width);
    }
    assert_eq!(
        text::multi_line_capped(&capped, width),
        capped,
        "capped not idempotent"
    );

    if let Ok(s) = std::str::from_utf8(bytes) {
        assert_eq!(text::one_line(s, width), one);
        assert_eq!(text::multi_line(s), multi);
        match text::validate_run_name(s) {
            Ok(None) => assert!(s.trim().is_empty()),
            Ok(Some(name)) => {
                assert_eq!(name, s.trim());
                assert!(name.chars().count() <= text::MAX_RUN_NAME_CHARS);
                assert!(name.chars().all(|c| InvisibleClass::of(c).is_none()));
            }
            Err(NameError::Invisible {
                code_point,
                position,
                class,
            }) => {
                assert_eq!(s.chars().nth(position - 1), Some(code_point));
                assert_eq!(InvisibleClass::of(code_point), Some(class));
            }
            Err(NameError::TooLong { chars }) => {
                assert!(chars > text::MAX_RUN_NAME_CHARS);
            }
        }
    }
});
