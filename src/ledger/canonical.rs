//! Canonical JSON for ledger lines: the one byte form a ledger event may take.
//!
//! The canonical form of a JSON value (see `docs/formats.md`, "Canonical form"):
//! - no insignificant whitespace anywhere;
//! - object keys in strictly increasing order of their UTF-8 bytes (so no duplicates);
//! - numbers are integers only, written `-?(0|[1-9][0-9]*)`, within the range of an `i64`
//!   (negative) or a `u64` (non-negative); no `-0`, no fraction, no exponent;
//! - strings hold raw UTF-8 except: `"` as `\"`, `\` as `\\`, U+0008/9/A/C/D as
//!   `\b \t \n \f \r`, and every other U+0000..U+001F as `\u00xx` (lowercase hex). Nothing
//!   else is escaped (not `/`, not DEL, not non-ASCII). This is exactly what `serde_json`
//!   writes, but it is implemented here so that the format does not depend on a library
//!   version or on a feature such as `preserve_order`.
//!
//! Two recognisers exist. [`scan_event`] is a fast, allocation-free recogniser that accepts
//! only canonical bytes and gives up ("not proven") on anything unusual; [`diagnose`] is the
//! reference: a full `serde_json` parse, a check of the value, and a comparison of the
//! re-serialised bytes. The fast one may give up on a canonical line (the reference then
//! accepts it); it must never accept a line the reference refuses. A property test checks
//! that direction.

use serde_json::{Map, Value};

/// Deepest nesting an appended event may have; the event object itself is level 1.
/// (`serde_json` refuses to parse beyond 128 levels, so a deeper event could not be verified.)
pub const MAX_DEPTH: usize = 64;

/// Why a value cannot be written in canonical form.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    #[error(
        "{path} is the number {number}, which is not an integer (or is out of the 64-bit \
         range); ledger events hold only integers, strings, booleans, null, arrays and objects, \
         so that re-serialisation is exact. Remedy: record it as a string or as an integer in \
         smaller units"
    )]
    NotAnInteger { path: String, number: String },
    #[error("{path} nests deeper than {MAX_DEPTH} levels. Remedy: flatten the event")]
    TooDeep { path: String },
}

/// What a writer accepts beyond the ledger's form.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// The ledger's form: integers only, depth bounded by [`MAX_DEPTH`].
    Ledger,
    /// Any value: other numbers as `serde_json::Number` displays them (shortest round trip), no
    /// depth bound (the caller bounds it).
    Any,
}

/// Writes `value` in canonical form, refusing floats and excessive depth.
pub fn write_value(out: &mut Vec<u8>, value: &Value) -> Result<(), ValueError> {
    let mut path = Vec::new();
    write_at(out, value, 1, &mut path, Mode::Ledger)
}

/// Writes any `value` in the same canonical form (no whitespace, keys sorted by their
/// bytes, strings as [`write_str`]), except that a number that is not a 64-bit integer is
/// written as `serde_json::Number` displays it and depth is not bounded: for digests over documents
/// that are not ledger events (a project configuration scan).
pub fn write_any(out: &mut Vec<u8>, value: &Value) {
    let mut path = Vec::new();
    // Mode::Any refuses nothing.
    let _ = write_at(out, value, 1, &mut path, Mode::Any);
}

/// Writes a JSON object from already ordered `(key, value)` entries. Keys must be sorted by
/// their bytes and unique; [`write_object_entries`] is the one place that enforces it.
pub(crate) fn write_object_entries<'a>(
    out: &mut Vec<u8>,
    entries: &mut [(&'a str, &'a Value)],
) -> Result<(), ValueError> {
    let mut path = Vec::new();
    entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    out.push(b'{');
    for (i, (k, v)) in entries.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_str(out, k);
        out.push(b':');
        path.push(PathSeg::Key(k));
        write_at(out, v, 2, &mut path, Mode::Ledger)?;
        path.pop();
    }
    out.push(b'}');
    Ok(())
}

enum PathSeg<'a> {
    Key(&'a str),
    Index(usize),
}

fn render_path(path: &[PathSeg<'_>]) -> String {
    let mut s = String::from("the event");
    for seg in path {
        match seg {
            PathSeg::Key(k) => {
                s.push('.');
                // Keys are untrusted text; JSON-quote any that is not a plain identifier.
                if !k.is_empty()
                    && k.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
                {
                    s.push_str(k);
                } else {
                    s.push_str(&serde_json::Value::String((*k).to_string()).to_string());
                }
            }
            PathSeg::Index(i) => s.push_str(&format!("[{i}]")),
        }
    }
    s
}

fn write_at<'a>(
    out: &mut Vec<u8>,
    value: &'a Value,
    depth: usize,
    path: &mut Vec<PathSeg<'a>>,
    mode: Mode,
) -> Result<(), ValueError> {
    let too_deep = mode == Mode::Ledger && depth >= MAX_DEPTH;
    match value {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => {
            if let Some(u) = n.as_u64() {
                write_u64(out, u);
            } else if let Some(i) = n.as_i64() {
                write_i64(out, i);
            } else if mode == Mode::Any {
                out.extend_from_slice(n.to_string().as_bytes());
            } else {
                return Err(ValueError::NotAnInteger {
                    path: render_path(path),
                    number: n.to_string(),
                });
            }
        }
        Value::String(s) => write_str(out, s),
        Value::Array(items) => {
            if too_deep {
                return Err(ValueError::TooDeep {
                    path: render_path(path),
                });
            }
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                path.push(PathSeg::Index(i));
                write_at(out, item, depth + 1, path, mode)?;
                path.pop();
            }
            out.push(b']');
        }
        Value::Object(map) => {
            if too_deep {
                return Err(ValueError::TooDeep {
                    path: render_path(path),
                });
            }
            write_map(out, map, depth, path, mode)?;
        }
    }
    Ok(())
}

fn write_map<'a>(
    out: &mut Vec<u8>,
    map: &'a Map<String, Value>,
    depth: usize,
    path: &mut Vec<PathSeg<'a>>,
    mode: Mode,
) -> Result<(), ValueError> {
    // Sort explicitly: the order must not depend on how `Map` is implemented.
    let mut entries: Vec<(&'a String, &'a Value)> = map.iter().collect();
    entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    out.push(b'{');
    for (i, (k, v)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_str(out, k);
        out.push(b':');
        path.push(PathSeg::Key(k));
        write_at(out, v, depth + 1, path, mode)?;
        path.pop();
    }
    out.push(b'}');
    Ok(())
}

fn write_u64(out: &mut Vec<u8>, mut n: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&buf[i..]);
}

fn write_i64(out: &mut Vec<u8>, n: i64) {
    if n < 0 {
        out.push(b'-');
    }
    write_u64(out, n.unsigned_abs());
}

const HEX: &[u8; 16] = b"0123456789abcdef";

/// Writes a JSON string in canonical form (see the module documentation).
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    out.push(b'"');
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &b) in bytes.iter().enumerate() {
        let short: &[u8] = match b {
            b'"' => b"\\\"",
            b'\\' => b"\\\\",
            0x08 => b"\\b",
            0x09 => b"\\t",
            0x0a => b"\\n",
            0x0c => b"\\f",
            0x0d => b"\\r",
            0x00..=0x1f => b"",
            _ => continue,
        };
        out.extend_from_slice(&bytes[start..i]);
        if short.is_empty() {
            out.extend_from_slice(b"\\u00");
            out.push(HEX[(b >> 4) as usize]);
            out.push(HEX[(b & 0xf) as usize]);
        } else {
            out.extend_from_slice(short);
        }
        start = i + 1;
    }
    out.extend_from_slice(&bytes[start..]);
    out.push(b'"');
}

/// The canonical bytes of a value (no trailing LF).
pub fn to_vec(value: &Value) -> Result<Vec<u8>, ValueError> {
    let mut out = Vec::with_capacity(128);
    write_value(&mut out, value)?;
    Ok(out)
}

/// Byte spans (inside the line) of the top-level values of the four envelope fields, as
/// found by [`scan_event`]. A string span excludes the quotes.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Envelope {
    pub seq: Option<Span>,
    pub at: Option<Span>,
    pub kind: Option<Span>,
    pub prev: Option<Span>,
}

/// A value's bytes inside the line, and whether it is a string without escapes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    pub start: usize,
    pub end: usize,
    /// The value is a JSON string with no escape; `start..end` is its content.
    pub plain_string: bool,
}

/// Fast recogniser: `Some` only if `line` (valid UTF-8, no LF) is a canonical JSON object.
/// `None` means "not proven": the caller must ask [`diagnose`].
pub fn scan_event(line: &[u8]) -> Option<Envelope> {
    let mut s = Scanner { b: line, i: 0 };
    let env = s.top_object()?;
    if s.i == line.len() { Some(env) } else { None }
}

struct Scanner<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Scanner<'a> {
    #[inline]
    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    #[inline]
    fn eat(&mut self, c: u8) -> Option<()> {
        if self.peek()? == c {
            self.i += 1;
            Some(())
        } else {
            None
        }
    }

    fn top_object(&mut self) -> Option<Envelope> {
        let mut env = Envelope::default();
        self.eat(b'{')?;
        if self.peek()? == b'}' {
            self.i += 1;
            return Some(env);
        }
        let mut last: Option<&'a [u8]> = None;
        loop {
            let key = self.key()?;
            if let Some(prev) = last
                && prev >= key
            {
                return None;
            }
            last = Some(key);
            self.eat(b':')?;
            let start = self.i;
            let plain = self.value(1)?;
            let span = match plain {
                Some((s, e)) => Span {
                    start: s,
                    end: e,
                    plain_string: true,
                },
                None => Span {
                    start,
                    end: self.i,
                    plain_string: false,
                },
            };
            match key {
                b"seq" => env.seq = Some(span),
                b"at" => env.at = Some(span),
                b"kind" => env.kind = Some(span),
                b"prev" => env.prev = Some(span),
                _ => {}
            }
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    return Some(env);
                }
                _ => return None,
            }
        }
    }

    /// A key: a string without escapes (keys with escapes are left to the reference, since
    /// their order is that of their decoded bytes).
    fn key(&mut self) -> Option<&'a [u8]> {
        let (s, e, escaped) = self.string()?;
        if escaped { None } else { Some(&self.b[s..e]) }
    }

    /// Scans a value. Returns `Some(Some(span))` for a string without escapes (content
    /// span), `Some(None)` for any other value, `None` if not proven canonical.
    fn value(&mut self, depth: usize) -> Option<Option<(usize, usize)>> {
        match self.peek()? {
            b'"' => {
                let (s, e, escaped) = self.string()?;
                Some(if escaped { None } else { Some((s, e)) })
            }
            b'{' => {
                if depth >= MAX_DEPTH {
                    return None;
                }
                self.object(depth + 1)?;
                Some(None)
            }
            b'[' => {
                if depth >= MAX_DEPTH {
                    return None;
                }
                self.array(depth + 1)?;
                Some(None)
            }
            b'-' | b'0'..=b'9' => {
                self.integer()?;
                Some(None)
            }
            b't' => self.literal(b"true"),
            b'f' => self.literal(b"false"),
            b'n' => self.literal(b"null"),
            _ => None,
        }
    }

    fn literal(&mut self, word: &[u8]) -> Option<Option<(usize, usize)>> {
        if self.b[self.i..].starts_with(word) {
            self.i += word.len();
            Some(None)
        } else {
            None
        }
    }

    fn object(&mut self, depth: usize) -> Option<()> {
        self.eat(b'{')?;
        if self.peek()? == b'}' {
            self.i += 1;
            return Some(());
        }
        let mut last: Option<&'a [u8]> = None;
        loop {
            let key = self.key()?;
            if let Some(prev) = last
                && prev >= key
            {
                return None;
            }
            last = Some(key);
            self.eat(b':')?;
            self.value(depth)?;
            match self.peek()? {
                b',' => self.i += 1,
                b'}' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    fn array(&mut self, depth: usize) -> Option<()> {
        self.eat(b'[')?;
        if self.peek()? == b']' {
            self.i += 1;
            return Some(());
        }
        loop {
            self.value(depth)?;
            match self.peek()? {
                b',' => self.i += 1,
                b']' => {
                    self.i += 1;
                    return Some(());
                }
                _ => return None,
            }
        }
    }

    /// A string in canonical escape form; returns the content span and whether it had an
    /// escape. The line is already known to be valid UTF-8, so bytes >= 0x80 pass as is.
    fn string(&mut self) -> Option<(usize, usize, bool)> {
        self.eat(b'"')?;
        let start = self.i;
        let mut escaped = false;
        loop {
            self.i += plain_run(self.b.get(self.i..)?);
            let c = *self.b.get(self.i)?;
            self.i += 1;
            match c {
                b'"' => return Some((start, self.i - 1, escaped)),
                b'\\' => {
                    escaped = true;
                    let e = *self.b.get(self.i)?;
                    self.i += 1;
                    match e {
                        b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't' => {}
                        b'u' => {
                            let h = self.b.get(self.i..self.i + 4)?;
                            self.i += 4;
                            if h[0] != b'0' || h[1] != b'0' || !matches!(h[2], b'0' | b'1') {
                                return None;
                            }
                            let lo = match h[3] {
                                d @ b'0'..=b'9' => d - b'0',
                                d @ b'a'..=b'f' => d - b'a' + 10,
                                _ => return None,
                            };
                            let v = (h[2] - b'0') * 16 + lo;
                            if matches!(v, 0x08 | 0x09 | 0x0a | 0x0c | 0x0d) {
                                return None;
                            }
                        }
                        _ => return None,
                    }
                }
                0x00..=0x1f => return None,
                _ => {}
            }
        }
    }

    /// An integer in canonical form and in range.
    fn integer(&mut self) -> Option<()> {
        let negative = self.peek()? == b'-';
        if negative {
            self.i += 1;
        }
        let start = self.i;
        match self.peek()? {
            b'0' => self.i += 1,
            b'1'..=b'9' => {
                while matches!(self.peek(), Some(b'0'..=b'9')) {
                    self.i += 1;
                }
            }
            _ => return None,
        }
        if matches!(self.peek(), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        let digits = &self.b[start..self.i];
        let magnitude = parse_u64(digits)?;
        if negative && (magnitude == 0 || magnitude > i64::MIN.unsigned_abs()) {
            return None;
        }
        Some(())
    }
}

/// Length of the leading run of bytes that a canonical string holds as is: anything but
/// `"`, `\` and U+0000..U+001F. Eight bytes at a time: for each word, a byte-wise "equals
/// `"`", "equals `\`" and "less than 0x20" test with the carry tricks of "bit twiddling
/// hacks"; their false positives only ever sit above a true one, so the lowest flagged byte
/// is the first special byte.
#[inline]
pub(crate) fn plain_run(s: &[u8]) -> usize {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    let mut i = 0;
    while let Some(word) = s.get(i..i + 8) {
        let mut w = [0u8; 8];
        w.copy_from_slice(word);
        let x = u64::from_le_bytes(w);
        let q = x ^ (LO * u64::from(b'"'));
        let b = x ^ (LO * u64::from(b'\\'));
        let special = ((q.wrapping_sub(LO) & !q)
            | (b.wrapping_sub(LO) & !b)
            | (x.wrapping_sub(LO * 0x20) & !x))
            & HI;
        if special != 0 {
            return i + (special.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while let Some(&c) = s.get(i) {
        if matches!(c, b'"' | b'\\' | 0x00..=0x1f) {
            break;
        }
        i += 1;
    }
    i
}

/// Parses ASCII digits as a u64, `None` on overflow or non-digits.
pub(crate) fn parse_u64(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() || digits.len() > 20 {
        return None;
    }
    let mut n: u64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
    }
    Some(n)
}

/// The reference judgement of a line (without its LF).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Diagnosis {
    /// Not JSON (or not UTF-8); the message says where.
    InvalidJson(String),
    /// JSON, but not an object.
    NotAnObject(&'static str),
    /// An object holding a number that is not a 64-bit integer.
    NotAnInteger(String),
    /// An object whose canonical bytes differ from the line; the offset of the first
    /// differing byte.
    NotCanonical(usize),
    /// A canonical object.
    Canonical(Map<String, Value>),
}

/// The reference: parse with `serde_json`, check the value, re-serialise, compare.
pub fn diagnose(line: &[u8]) -> Diagnosis {
    if let Err(e) = std::str::from_utf8(line) {
        return Diagnosis::InvalidJson(format!("not UTF-8 at byte {}", e.valid_up_to()));
    }
    let value: Value = match serde_json::from_slice(line) {
        Ok(v) => v,
        Err(e) => return Diagnosis::InvalidJson(e.to_string()),
    };
    let map = match value {
        Value::Object(m) => m,
        Value::Null => return Diagnosis::NotAnObject("null"),
        Value::Bool(_) => return Diagnosis::NotAnObject("a boolean"),
        Value::Number(_) => return Diagnosis::NotAnObject("a number"),
        Value::String(_) => return Diagnosis::NotAnObject("a string"),
        Value::Array(_) => return Diagnosis::NotAnObject("an array"),
    };
    let mut out = Vec::with_capacity(line.len());
    let mut path = Vec::new();
    if let Err(e) = write_map(&mut out, &map, 1, &mut path, Mode::Ledger) {
        return match e {
            ValueError::NotAnInteger { path, number } => {
                Diagnosis::NotAnInteger(format!("{path} is {number}"))
            }
            // serde_json parsed it, so it is at most 128 deep; deeper than MAX_DEPTH is
            // still a value we would never have written.
            ValueError::TooDeep { path } => Diagnosis::InvalidJson(format!(
                "{path} nests deeper than {MAX_DEPTH} levels, more than proctor writes"
            )),
        };
    }
    if out == line {
        Diagnosis::Canonical(map)
    } else {
        let at = out
            .iter()
            .zip(line)
            .position(|(a, b)| a != b)
            .unwrap_or(out.len().min(line.len()));
        Diagnosis::NotCanonical(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn canon(v: &Value) -> Vec<u8> {
        to_vec(v).unwrap()
    }

    #[test]
    fn the_writer_for_any_value_is_the_ledgers_plus_other_numbers_and_depth() {
        let v = json!({"b": 1, "a": {"z": [1, {"y": null, "x": true}], "é": "\u{7}\n", "Z": -3}});
        let mut any = Vec::new();
        write_any(&mut any, &v);
        assert_eq!(any, canon(&v), "same bytes as the ledger's writer");
        let mut any = Vec::new();
        write_any(&mut any, &json!({"f": 1.5, "e": 1e300, "n": -0.25}));
        let shown = |f: f64| serde_json::Number::from_f64(f).unwrap().to_string();
        assert_eq!(
            String::from_utf8(any).unwrap(),
            format!(r#"{{"e":{},"f":1.5,"n":-0.25}}"#, shown(1e300))
        );
        let mut deep = json!(0);
        for _ in 0..MAX_DEPTH + 5 {
            deep = json!([deep]);
        }
        let mut any = Vec::new();
        write_any(&mut any, &deep);
        assert_eq!(any, serde_json::to_vec(&deep).unwrap());
        assert!(
            to_vec(&deep).is_err(),
            "the ledger's form still bounds depth"
        );
    }

    #[test]
    fn keys_are_sorted_by_bytes_whatever_the_map_order() {
        let v = json!({"b": 1, "a": {"z": [1, {"y": null, "x": true}], "é": "", "Z": -3}});
        assert_eq!(
            String::from_utf8(canon(&v)).unwrap(),
            r#"{"a":{"Z":-3,"z":[1,{"x":true,"y":null}],"é":""},"b":1}"#
        );
    }

    #[test]
    fn escapes_are_exactly_serde_jsons() {
        let all: String = (0u32..0x250).filter_map(char::from_u32).collect();
        let s = Value::String(all + "\u{7f}\u{9b}\u{202e}/\"\\");
        assert_eq!(canon(&s), serde_json::to_vec(&s).unwrap());
        assert_eq!(canon(&json!("\u{1}\u{1f}")), br#""\u0001\u001f""#.to_vec());
    }

    #[test]
    fn floats_and_depth_are_refused_with_a_path() {
        let e = to_vec(&json!({"a": [1, {"b c": 1.5}]})).unwrap_err();
        assert_eq!(
            e,
            ValueError::NotAnInteger {
                path: "the event.a[1].\"b c\"".into(),
                number: "1.5".into()
            }
        );
        let mut deep = json!(1);
        for _ in 0..MAX_DEPTH {
            deep = json!([deep]);
        }
        assert!(matches!(
            to_vec(&json!({ "d": deep })),
            Err(ValueError::TooDeep { .. })
        ));
        let mut ok = json!(1);
        for _ in 0..MAX_DEPTH - 2 {
            ok = json!([ok]);
        }
        let bytes = to_vec(&json!({ "d": ok })).unwrap();
        assert!(scan_event(&bytes).is_some());
        assert!(matches!(diagnose(&bytes), Diagnosis::Canonical(_)));
    }

    #[test]
    fn integer_extremes() {
        let v = json!({"a": u64::MAX, "b": i64::MIN, "c": 0, "d": -1});
        let b = canon(&v);
        assert_eq!(
            b,
            br#"{"a":18446744073709551615,"b":-9223372036854775808,"c":0,"d":-1}"#.to_vec()
        );
        assert!(scan_event(&b).is_some());
        for bad in [
            r#"{"a":18446744073709551616}"#,
            r#"{"a":-9223372036854775809}"#,
            r#"{"a":-0}"#,
            r#"{"a":01}"#,
            r#"{"a":1.0}"#,
            r#"{"a":1e3}"#,
        ] {
            assert!(scan_event(bad.as_bytes()).is_none(), "{bad}");
            assert!(
                !matches!(diagnose(bad.as_bytes()), Diagnosis::Canonical(_)),
                "{bad}"
            );
        }
    }

    #[test]
    fn the_reference_names_each_fault() {
        assert!(matches!(diagnose(b"{\"a\":"), Diagnosis::InvalidJson(_)));
        assert!(matches!(diagnose(b"\xff"), Diagnosis::InvalidJson(m) if m.contains("UTF-8")));
        assert_eq!(diagnose(b"[1]"), Diagnosis::NotAnObject("an array"));
        assert!(
            matches!(diagnose(b"{\"a\":0.5}"), Diagnosis::NotAnInteger(m) if m.contains("the event.a is 0.5"))
        );
        assert_eq!(diagnose(b"{\"b\":1,\"a\":2}"), Diagnosis::NotCanonical(2));
        assert_eq!(diagnose(b"{\"a\": 2}"), Diagnosis::NotCanonical(5));
        assert!(matches!(
            diagnose(b"{\"a\":1,\"a\":2}"),
            Diagnosis::NotCanonical(_)
        ));
        assert!(matches!(
            diagnose(br#"{"a":"\/"}"#),
            Diagnosis::NotCanonical(_)
        ));
        assert!(matches!(
            diagnose(br#"{"a":"\u0041"}"#),
            Diagnosis::NotCanonical(_)
        ));
        assert!(matches!(
            diagnose(br#"{"a":"\u000A"}"#),
            Diagnosis::NotCanonical(_)
        ));
    }

    #[test]
    fn escaped_keys_are_left_to_the_reference_which_orders_them_by_decoded_bytes() {
        // "\n" (0x0a) sorts before "a" (0x61) although its escape starts with '\' (0x5c).
        let v = json!({"a": 1, "\n": 2});
        let b = canon(&v);
        assert_eq!(b, br#"{"\n":2,"a":1}"#.to_vec());
        assert!(scan_event(&b).is_none());
        assert!(matches!(diagnose(&b), Diagnosis::Canonical(_)));
    }

    #[test]
    fn the_scanner_finds_the_envelope() {
        let line = br#"{"at":"x","kind":"a.b","n":[1,{"seq":9}],"prev":"p","seq":12}"#;
        let env = scan_event(line).unwrap();
        let s = |sp: Span| std::str::from_utf8(&line[sp.start..sp.end]).unwrap();
        assert_eq!(s(env.at.unwrap()), "x");
        assert_eq!(s(env.kind.unwrap()), "a.b");
        assert_eq!(s(env.prev.unwrap()), "p");
        assert_eq!(s(env.seq.unwrap()), "12");
        assert!(!env.seq.unwrap().plain_string);
    }

    fn naive_plain_run(s: &[u8]) -> usize {
        s.iter()
            .position(|&c| matches!(c, b'"' | b'\\' | 0x00..=0x1f))
            .unwrap_or(s.len())
    }

    #[test]
    fn plain_run_finds_the_first_special_byte() {
        for special in [b'"', b'\\', 0x00, 0x1f, 0x0a] {
            for len in 0..20 {
                for at in 0..=len {
                    let mut v: Vec<u8> = (0..len)
                        .map(|i| [b'a', 0x20, 0xff, 0x7f, 0x80, b'!'][i % 6])
                        .collect();
                    if at < len {
                        v[at] = special;
                    }
                    // Specials after the first must not confuse it.
                    v.extend_from_slice(b"\x00\"\\");
                    assert_eq!(plain_run(&v), naive_plain_run(&v), "{v:?}");
                }
            }
        }
    }

    fn arb_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<String>().prop_map(Value::String),
            "[a-c\\n\"\\\\\u{1}é]{0,4}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 48, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
                prop::collection::btree_map("[a-d\\n\u{1}é\"]{0,3}", inner, 0..6)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    fn arb_object() -> impl Strategy<Value = Value> {
        prop::collection::btree_map("[a-z\\n]{0,4}", arb_value(), 0..6)
            .prop_map(|m| Value::Object(m.into_iter().collect()))
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]

        /// The canonical bytes of any object are accepted by the reference, parse back to
        /// the same value, and are what serde_json itself writes.
        #[test]
        fn plain_run_agrees_with_the_naive_scan(v in prop::collection::vec(any::<u8>(), 0..40)) {
            prop_assert_eq!(plain_run(&v), naive_plain_run(&v));
        }

        #[test]
        fn canonical_bytes_round_trip(v in arb_object()) {
            let b = canon(&v);
            prop_assert_eq!(&b, &serde_json::to_vec(&v).unwrap());
            match diagnose(&b) {
                Diagnosis::Canonical(m) => prop_assert_eq!(Value::Object(m), v),
                d => prop_assert!(false, "{:?}", d),
            }
        }

        /// The fast scanner never accepts what the reference refuses, on canonical lines
        /// and on lines damaged by an edit.
        #[test]
        fn the_scanner_is_sound(v in arb_object(), edits in prop::collection::vec((any::<prop::sample::Index>(), 0u8..3, any::<u8>()), 0..3)) {
            let mut b = canon(&v);
            for (at, op, byte) in edits {
                let i = if b.is_empty() { 0 } else { at.index(b.len()) };
                let byte = b"{}[]\",:-0123456789.eE\\ntrufalsenul \x01\xc3\xa9"[byte as usize % 36];
                match op {
                    0 if !b.is_empty() => { b.remove(i); }
                    1 => b.insert(i, byte),
                    _ if !b.is_empty() => b[i] = byte,
                    _ => {}
                }
            }
            if std::str::from_utf8(&b).is_ok() && scan_event(&b).is_some() {
                prop_assert!(matches!(diagnose(&b), Diagnosis::Canonical(_)), "{:?}", String::from_utf8_lossy(&b));
            }
        }
    }
}
