//! Reading a ledger: the line checks, the chain walk, the fixed point.
//!
//! The file is read in large chunks. Within a chunk, lines are independent (canonical
//! check, envelope fields, SHA-256 of the line), so they are checked in parallel with
//! rayon while the file digest runs beside them; the chain (seq and prev) is then walked in
//! order, which is cheap. The walk stops at the first bad line.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use rayon::prelude::*;
use serde::Serialize;
use sha2::{Digest, Sha256};

use super::canonical::{self, Diagnosis, Envelope};
use super::{EMPTY_SHA256, FIXED_POINT_FORMAT, LedgerError, RECOVERY_KIND};

/// Bytes read per chunk.
const CHUNK: usize = 8 << 20;
/// Bytes of complete lines given to one parallel task.
const PART: usize = 256 << 10;

/// Why a line is bad. The names are stable (they appear in `verify --json`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    /// Not UTF-8 or not JSON (includes an empty line).
    InvalidJson,
    /// JSON, but not an object.
    NotAnObject,
    /// A number with a fraction or exponent, or outside the 64-bit integer range.
    NonIntegerNumber,
    /// A JSON object, but not in canonical form (order, spacing, escapes, duplicates).
    NotCanonical,
    /// One of seq, at, kind, prev is absent.
    MissingField,
    /// seq, at or prev has the wrong type or shape.
    BadField,
    /// kind is not lowercase dotted segments.
    BadKind,
    /// seq is not the previous seq plus one (the first line must have seq 1).
    SeqGap,
    /// prev is not the SHA-256 of the previous line's bytes.
    HashMismatch,
    /// The last line has no terminating LF.
    MissingFinalLf,
}

impl Reason {
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::InvalidJson => "invalid_json",
            Reason::NotAnObject => "not_an_object",
            Reason::NonIntegerNumber => "non_integer_number",
            Reason::NotCanonical => "not_canonical",
            Reason::MissingField => "missing_field",
            Reason::BadField => "bad_field",
            Reason::BadKind => "bad_kind",
            Reason::SeqGap => "seq_gap",
            Reason::HashMismatch => "hash_mismatch",
            Reason::MissingFinalLf => "missing_final_lf",
        }
    }

    /// The same in words.
    pub fn describe(self) -> &'static str {
        match self {
            Reason::InvalidJson => "invalid JSON",
            Reason::NotAnObject => "not a JSON object",
            Reason::NonIntegerNumber => "non-integer number",
            Reason::NotCanonical => "not in canonical form",
            Reason::MissingField => "missing field",
            Reason::BadField => "malformed field",
            Reason::BadKind => "malformed kind",
            Reason::SeqGap => "seq gap",
            Reason::HashMismatch => "hash mismatch",
            Reason::MissingFinalLf => "missing final LF",
        }
    }
}

impl std::fmt::Display for Reason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.describe())
    }
}

/// The first bad line of a ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BadLine {
    /// 1-based line number.
    pub line: u64,
    /// Byte offset where the line starts.
    pub offset: u64,
    /// Byte offset just past the line (past its LF when it has one).
    pub end: u64,
    pub reason: Reason,
    /// What exactly is wrong, in words (may quote ledger contents: sanitise before display).
    pub detail: String,
}

impl std::fmt::Display for BadLine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "line {}: {}: {}", self.line, self.reason, self.detail)
    }
}

/// `{format, bytes, events, sha256}` of the exact file bytes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct FixedPoint {
    /// Always `proctor-ledger-fixed-point/1`.
    pub format: String,
    /// Length of the file in bytes.
    pub bytes: u64,
    /// Number of lines (events).
    pub events: u64,
    /// SHA-256 of the exact file bytes, lowercase hex.
    pub sha256: String,
}

/// A ledger that verified from its first byte to its last.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    pub fixed_point: FixedPoint,
    /// SHA-256 of the last line (the `prev` of the next one); of the empty string if none.
    pub last_line_sha256: [u8; 32],
}

/// Everything one walk learns.
pub(crate) struct Walk {
    /// Bytes of the intact prefix (all complete, valid, chained lines).
    pub good_bytes: u64,
    pub events: u64,
    pub last_hash: [u8; 32],
    /// SHA-256 of the whole file read; meaningful only when `fault` is `None`.
    pub file_sha256: [u8; 32],
    pub fault: Option<BadLine>,
    /// The lines of kind `ledger.torn_tail_recovered` in the intact prefix.
    pub recovery_lines: Vec<Vec<u8>>,
}

struct LineInfo {
    seq: u64,
    prev: [u8; 32],
    hash: [u8; 32],
    /// Length including the LF.
    len: u64,
    recovery: bool,
}

/// Reads `len` bytes of `file` from the start and walks the chain.
pub(crate) fn walk(file: &File, path: &Path, len: u64) -> Result<Walk, LedgerError> {
    walk_chunked(file, path, len, CHUNK)
}

/// [`walk`] with a given read size (tests use tiny ones to cross every boundary).
pub(crate) fn walk_chunked(
    file: &File,
    path: &Path,
    len: u64,
    chunk: usize,
) -> Result<Walk, LedgerError> {
    let mut w = Walk {
        good_bytes: 0,
        events: 0,
        last_hash: EMPTY_SHA256,
        file_sha256: [0; 32],
        fault: None,
        recovery_lines: Vec::new(),
    };
    let mut file_hasher = Sha256::new();
    let mut buf: Vec<u8> = Vec::new();
    let mut pos: u64 = 0; // file offset of buf[0]
    let mut read_to: u64 = 0;
    loop {
        // Fill: read up to CHUNK more bytes after what is carried over.
        let want = usize::try_from((len - read_to).min(chunk as u64)).unwrap_or(chunk);
        let old = buf.len();
        buf.resize(old + want, 0);
        read_exact_at(file, path, &mut buf[old..], read_to)?;
        read_to += want as u64;
        let at_eof = read_to == len;

        // The carried-over bytes hold no LF: look only at what was just read.
        let complete = match buf[old..].iter().rposition(|&b| b == b'\n') {
            Some(i) => old + i + 1,
            None if at_eof => 0,
            None => continue,
        };
        let fault = {
            let region = &buf[..complete];
            let (_, results) = rayon::join(|| file_hasher.update(region), || check_region(region));
            chain(&mut w, region, pos, &results)
        };
        if let Some(f) = fault {
            w.fault = Some(f);
            return Ok(w);
        }
        pos += complete as u64;
        buf.drain(..complete);
        if at_eof {
            if !buf.is_empty() {
                let detail = match canonical::diagnose(&buf) {
                    Diagnosis::Canonical(_) => format!(
                        "the last {} bytes are a complete JSON object without its LF: an \
                         append that was cut before its end (torn tail)",
                        buf.len()
                    ),
                    _ => format!(
                        "the last {} bytes are not a complete line: an append that was cut \
                         (torn tail)",
                        buf.len()
                    ),
                };
                w.fault = Some(BadLine {
                    line: w.events + 1,
                    offset: pos,
                    end: len,
                    reason: Reason::MissingFinalLf,
                    detail,
                });
                return Ok(w);
            }
            w.file_sha256 = file_hasher.finalize().into();
            return Ok(w);
        }
    }
}

fn read_exact_at(file: &File, path: &Path, buf: &mut [u8], at: u64) -> Result<(), LedgerError> {
    file.read_exact_at(buf, at).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            LedgerError::io(
                "read",
                path,
                std::io::Error::other("the file shrank while it was being read"),
            )
        } else {
            LedgerError::io("read", path, e)
        }
    })
}

/// Checks every line of `region` (complete lines, each ending in LF) in parallel.
fn check_region(region: &[u8]) -> Vec<Vec<Result<LineInfo, (Reason, String)>>> {
    let mut parts: Vec<&[u8]> = Vec::new();
    let mut rest = region;
    while !rest.is_empty() {
        let cut = if rest.len() <= PART {
            rest.len()
        } else {
            match rest[PART..].iter().position(|&b| b == b'\n') {
                Some(i) => PART + i + 1,
                None => rest.len(),
            }
        };
        parts.push(&rest[..cut]);
        rest = &rest[cut..];
    }
    parts
        .par_iter()
        .map(|part| {
            part.split_inclusive(|&b| b == b'\n')
                .map(check_line)
                .collect()
        })
        .collect()
}

/// Walks the chain over the checked lines in order; stops at the first fault.
fn chain(
    w: &mut Walk,
    region: &[u8],
    region_pos: u64,
    results: &[Vec<Result<LineInfo, (Reason, String)>>],
) -> Option<BadLine> {
    let mut offset = region_pos;
    for r in results.iter().flatten() {
        let line_no = w.events + 1;
        let info = match r {
            Ok(info) => info,
            Err((reason, detail)) => {
                let local = usize::try_from(offset - region_pos).unwrap_or(usize::MAX);
                let len = region
                    .get(local..)
                    .and_then(|s| s.iter().position(|&b| b == b'\n'))
                    .map_or(0, |i| i + 1) as u64;
                return Some(BadLine {
                    line: line_no,
                    offset,
                    end: offset + len,
                    reason: *reason,
                    detail: detail.clone(),
                });
            }
        };
        let bad = |reason, detail| BadLine {
            line: line_no,
            offset,
            end: offset + info.len,
            reason,
            detail,
        };
        if info.seq != line_no {
            return Some(bad(
                Reason::SeqGap,
                format!("seq is {}, expected {line_no}", info.seq),
            ));
        }
        if info.prev != w.last_hash {
            let what = if line_no == 1 {
                "the first line's prev must be the SHA-256 of the empty string".to_string()
            } else {
                format!(
                    "line {} hashes to sha256:{}",
                    line_no - 1,
                    hex::encode(w.last_hash)
                )
            };
            return Some(bad(
                Reason::HashMismatch,
                format!("prev is sha256:{}, but {what}", hex::encode(info.prev)),
            ));
        }
        if info.recovery {
            let local = usize::try_from(offset - region_pos).unwrap_or(usize::MAX);
            let end = local + usize::try_from(info.len).unwrap_or(0);
            if let Some(line) = region.get(local..end) {
                w.recovery_lines.push(line.to_vec());
            }
        }
        w.last_hash = info.hash;
        w.events += 1;
        offset += info.len;
        w.good_bytes = offset;
    }
    None
}

/// Checks one line (with its LF) on its own: form, envelope, and its hash.
fn check_line(with_lf: &[u8]) -> Result<LineInfo, (Reason, String)> {
    let line = &with_lf[..with_lf.len() - 1];
    let hash: [u8; 32] = Sha256::digest(with_lf).into();
    let len = with_lf.len() as u64;
    if std::str::from_utf8(line).is_ok()
        && let Some(env) = canonical::scan_event(line)
        && let Some(info) = envelope_fast(line, &env, hash, len)
    {
        return Ok(info);
    }
    // Slow path: the reference judgement, and the exact reason.
    match canonical::diagnose(line) {
        Diagnosis::InvalidJson(m) => Err((Reason::InvalidJson, m)),
        Diagnosis::NotAnObject(what) => Err((Reason::NotAnObject, format!("the line is {what}"))),
        Diagnosis::NotAnInteger(m) => Err((Reason::NonIntegerNumber, m)),
        Diagnosis::NotCanonical(at) => Err((
            Reason::NotCanonical,
            format!(
                "valid JSON, but its canonical form differs from byte {at} of the line \
                 (key order, spacing, escapes or duplicate keys)"
            ),
        )),
        Diagnosis::Canonical(map) => envelope_slow(&map, hash, len),
    }
}

fn envelope_fast(line: &[u8], env: &Envelope, hash: [u8; 32], len: u64) -> Option<LineInfo> {
    // A plain string's span excludes its quotes: "1" must not pass as the number 1.
    let seq_span = env.seq.filter(|s| !s.plain_string)?;
    let seq = canonical::parse_u64(&line[seq_span.start..seq_span.end]).filter(|&s| s > 0)?;
    let at = env.at.filter(|s| s.plain_string)?;
    if !valid_at(std::str::from_utf8(&line[at.start..at.end]).ok()?) {
        return None;
    }
    let kind = env.kind.filter(|s| s.plain_string)?;
    let kind = std::str::from_utf8(&line[kind.start..kind.end]).ok()?;
    if !valid_kind(kind) {
        return None;
    }
    let prev = env.prev.filter(|s| s.plain_string)?;
    let prev = parse_prev(std::str::from_utf8(&line[prev.start..prev.end]).ok()?)?;
    Some(LineInfo {
        seq,
        prev,
        hash,
        len,
        recovery: kind == RECOVERY_KIND,
    })
}

fn envelope_slow(
    map: &serde_json::Map<String, serde_json::Value>,
    hash: [u8; 32],
    len: u64,
) -> Result<LineInfo, (Reason, String)> {
    use serde_json::Value;
    let get = |name: &str| {
        map.get(name)
            .ok_or_else(|| (Reason::MissingField, format!("no \"{name}\" field")))
    };
    let seq = match get("seq")? {
        Value::Number(n) => match n.as_u64() {
            Some(s) if s > 0 => s,
            _ => {
                return Err((
                    Reason::BadField,
                    format!("seq is {n}, not a positive integer"),
                ));
            }
        },
        _ => {
            return Err((
                Reason::BadField,
                "seq is not a number (it must be a positive integer)".into(),
            ));
        }
    };
    let at_ok = matches!(get("at")?, Value::String(s) if valid_at(s));
    if !at_ok {
        return Err((
            Reason::BadField,
            "at is not an RFC 3339 UTC time with milliseconds (YYYY-MM-DDTHH:MM:SS.mmmZ)".into(),
        ));
    }
    let kind = match get("kind")? {
        Value::String(s) => s,
        _ => return Err((Reason::BadField, "kind is not a string".into())),
    };
    if !valid_kind(kind) {
        return Err((
            Reason::BadKind,
            format!(
                "kind {} is not lowercase dotted segments ([a-z][a-z0-9_]* joined by '.', at \
                 least two)",
                serde_json::Value::String(kind.clone())
            ),
        ));
    }
    let prev = match get("prev")? {
        Value::String(s) => parse_prev(s),
        _ => None,
    }
    .ok_or_else(|| {
        (
            Reason::BadField,
            "prev is not \"sha256:\" followed by 64 lowercase hex digits".to_string(),
        )
    })?;
    Ok(LineInfo {
        seq,
        prev,
        hash,
        len,
        recovery: kind == RECOVERY_KIND,
    })
}

/// `[a-z][a-z0-9_]*(\.[a-z][a-z0-9_]*)+`
pub fn valid_kind(kind: &str) -> bool {
    let mut segments = 0;
    for seg in kind.split('.') {
        let mut bytes = seg.bytes();
        match bytes.next() {
            Some(b'a'..=b'z') => {}
            _ => return false,
        }
        if !bytes.all(|b| matches!(b, b'a'..=b'z' | b'0'..=b'9' | b'_')) {
            return false;
        }
        segments += 1;
    }
    segments >= 2
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ`, a real calendar date, hours < 24, minutes and seconds < 60.
pub fn valid_at(at: &str) -> bool {
    let b = at.as_bytes();
    if b.len() != 24 {
        return false;
    }
    let shape = b"dddd-dd-ddTdd:dd:dd.dddZ";
    for (c, s) in b.iter().zip(shape) {
        let ok = if *s == b'd' {
            c.is_ascii_digit()
        } else {
            c == s
        };
        if !ok {
            return false;
        }
    }
    let num =
        |r: std::ops::Range<usize>| b[r].iter().fold(0u32, |n, d| n * 10 + u32::from(d - b'0'));
    let (year, month, day) = (num(0..4), num(5..7), num(8..10));
    let Ok(year) = i32::try_from(year) else {
        return false;
    };
    chrono::NaiveDate::from_ymd_opt(year, month, day).is_some()
        && num(11..13) < 24
        && num(14..16) < 60
        && num(17..19) < 60
}

/// `sha256:` followed by 64 lowercase hex digits.
pub fn parse_prev(prev: &str) -> Option<[u8; 32]> {
    let hexpart = prev.strip_prefix("sha256:")?;
    if hexpart.len() != 64
        || !hexpart
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    {
        return None;
    }
    let mut out = [0u8; 32];
    hex::decode_to_slice(hexpart, &mut out).ok()?;
    Some(out)
}

/// The fixed point of a walk that found no fault.
pub(crate) fn fixed_point_of(w: &Walk) -> FixedPoint {
    FixedPoint {
        format: FIXED_POINT_FORMAT.to_string(),
        bytes: w.good_bytes,
        events: w.events,
        sha256: hex::encode(w.file_sha256),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The reference judgement alone (no fast path).
    fn reference(with_lf: &[u8]) -> Result<(u64, [u8; 32], bool), (Reason, String)> {
        let line = &with_lf[..with_lf.len() - 1];
        let hash: [u8; 32] = Sha256::digest(with_lf).into();
        match canonical::diagnose(line) {
            Diagnosis::Canonical(map) => {
                envelope_slow(&map, hash, with_lf.len() as u64).map(|i| (i.seq, i.prev, i.recovery))
            }
            _ => Err((Reason::InvalidJson, String::new())),
        }
    }

    /// A field that is usually valid, sometimes absent or wrong in one way.
    fn field(valid: &[&str], wrong: &[&str]) -> impl Strategy<Value = Option<String>> + use<> {
        let valid: Vec<Option<String>> = valid.iter().map(|s| Some(s.to_string())).collect();
        let mut wrong: Vec<Option<String>> = wrong.iter().map(|s| Some(s.to_string())).collect();
        wrong.push(None);
        prop_oneof![
            3 => prop::sample::select(valid),
            2 => prop::sample::select(wrong),
        ]
    }

    const ANY_WRONG: &[&str] = &["null", "true", "[1]", "{\"seq\":1}", "\"\"", "-1"];

    fn arb_seq() -> impl Strategy<Value = Option<String>> {
        let wrong = [
            ANY_WRONG,
            &["0", "\"1\"", "\"\\u0031\"", "18446744073709551616", "1.0"],
        ]
        .concat();
        field(&["1", "42", "18446744073709551615"], &wrong)
    }

    fn arb_at() -> impl Strategy<Value = Option<String>> {
        let wrong = [
            ANY_WRONG,
            &[
                "\"2026-11-30T24:01:02.345Z\"",
                "\"2026-11-30T06:01:02.345\\u005a\"",
                "\"2026-11-30T06:01:02Z\"",
                "20261130",
            ],
        ]
        .concat();
        field(&["\"2026-11-30T06:01:02.345Z\""], &wrong)
    }

    fn arb_kind() -> impl Strategy<Value = Option<String>> {
        let wrong = [
            ANY_WRONG,
            &["\"a\"", "\"a.\\u0062\"", "\"A.b\"", "\"a.b\\n\""],
        ]
        .concat();
        field(&["\"a.b\"", "\"ledger.torn_tail_recovered\""], &wrong)
    }

    fn arb_prev() -> impl Strategy<Value = Option<String>> {
        let good = format!("\"sha256:{}\"", hex::encode(EMPTY_SHA256));
        let upper = format!("\"sha256:{}\"", "A".repeat(64));
        let bare = format!("\"{}\"", hex::encode(EMPTY_SHA256));
        let short = format!("\"sha256:{}\"", "a".repeat(63));
        let escaped = format!("\"sha256:{}\\u0030\"", "a".repeat(63));
        let wrong: Vec<&str> = ANY_WRONG
            .iter()
            .copied()
            .chain([
                upper.as_str(),
                bare.as_str(),
                short.as_str(),
                escaped.as_str(),
            ])
            .collect();
        field(&[good.as_str()], &wrong)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        /// Whatever the envelope holds, the fast path accepts a line only when the reference
        /// does, with the same seq, prev and kind class.
        #[test]
        fn the_fast_path_agrees_with_the_reference(
            seq in arb_seq(), at in arb_at(), kind in arb_kind(), prev in arb_prev(),
            extra in prop::option::of("[a-z]{1,3}"),
        ) {
            let mut parts: Vec<(String, String)> = Vec::new();
            for (k, v) in [("seq", seq), ("at", at), ("kind", kind), ("prev", prev)] {
                if let Some(v) = v {
                    parts.push((k.to_string(), v));
                }
            }
            if let Some(e) = extra {
                parts.push((e, "7".to_string()));
            }
            parts.sort();
            parts.dedup_by(|a, b| a.0 == b.0);
            let body: Vec<String> = parts.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
            let line = format!("{{{}}}\n", body.join(","));
            let fast = check_line(line.as_bytes()).map(|i| (i.seq, i.prev, i.recovery));
            let slow = reference(line.as_bytes());
            prop_assert_eq!(fast.is_ok(), slow.is_ok(), "{}", line);
            if let (Ok(f), Ok(s)) = (fast, slow) {
                prop_assert_eq!(f, s, "{}", line);
            }
        }
    }

    #[test]
    fn kinds_and_times() {
        for k in [
            "a.b",
            "sessions.run.renamed",
            "a_1.b2_",
            "ledger.torn_tail_recovered",
        ] {
            assert!(valid_kind(k), "{k}");
        }
        for k in [
            "a", "a.", ".a", "a..b", "A.b", "a.B", "1.a", "a._b", "a.b-c", "a b.c", "",
        ] {
            assert!(!valid_kind(k), "{k}");
        }
        assert!(valid_at("2028-02-29T23:59:59.999Z"));
        for at in [
            "2026-02-29T00:00:00.000Z",
            "2026-13-01T00:00:00.000Z",
            "2026-01-01T00:60:00.000Z",
            "2026-01-01T00:00:60.000Z",
            "2026-01-01 00:00:00.000Z",
            "2026-01-01T00:00:00.000z",
            "2026-01-01T00:00:00.0000Z",
            "+2026-01-01T00:00:00.000Z",
        ] {
            assert!(!valid_at(at), "{at}");
        }
        assert!(valid_at(&super::super::now_at()));
    }
}
