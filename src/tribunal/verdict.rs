//! Reading a juror's answer strictly (issue 14 §4, seed 001 "Le verdict").
//!
//! [`judge`] turns the text a juror answered into a [`Judged`]: a verdict for the seated
//! lens, a verdict for another lens (a rejected rung, not a verdict), or a bad answer (counts
//! as refuse). The rules, in the order they apply:
//!
//! 1. The answer is at most [`MAX_ANSWER_BYTES`]; surrounding whitespace is ignored.
//! 2. It is exactly one JSON object and nothing else: no prose before or after, no second
//!    object. One exception: the whole answer may be ONE Markdown code fence (```` ``` ```` or
//!    ```` ```json ````) holding that one object and nothing else. A fence is markup, not
//!    prose; CLI harnesses add it around a final message on their own, and counting a correct
//!    verdict as refuse for it would spend a round on nothing. The note says it was fenced.
//! 3. Its shape is exactly [`Verdict`]: the keys `verdict`, `lens`, `findings` and no other,
//!    each once; every finding exactly `severity`, `claim`, `evidence`; the words lowercase
//!    (`pass`/`refuse`, `blocker`/`major`/`minor`/`info`). At most [`MAX_FINDINGS`] findings, a
//!    claim of 1..=[`MAX_CLAIM_CHARS`] characters, evidence of at most
//!    [`MAX_EVIDENCE_CHARS`]. Anything else is [`Judged::Bad`] with a bounded `raw_tail`.
//! 4. A well-formed verdict whose `lens` is not the seated lens, byte for byte, is
//!    [`Judged::OffLens`] (the lens it answered and a bounded `raw_tail`).
//! 5. A pass that lists a blocker or major finding counts as refuse; the note names the
//!    severities. A pass in which no finding carries evidence (no findings at all, or claims
//!    without evidence) is `bare`: it counts, never as the only evidence.

use serde::Deserialize;
use serde_json::{Value, json};

use crate::tribunal::model::{Finding, Judged, RAW_TAIL_BYTES, Severity, Verdict, Word};

/// The largest answer read; a longer one is bad.
pub const MAX_ANSWER_BYTES: usize = 256 * 1024;
/// The most findings one verdict may list.
pub const MAX_FINDINGS: usize = 64;
/// The longest claim, in characters.
pub const MAX_CLAIM_CHARS: usize = 1000;
/// The longest evidence, in characters.
pub const MAX_EVIDENCE_CHARS: usize = 4000;

/// Reads `text` as a verdict for `lens` (see the module's rules).
pub fn judge(text: &str, lens: &str) -> Judged {
    let bad = |problem: String| Judged::Bad {
        problem,
        raw_tail: raw_tail(text),
    };
    if text.len() > MAX_ANSWER_BYTES {
        return bad(format!(
            "the answer is {} bytes, over the {MAX_ANSWER_BYTES} a verdict may take",
            text.len()
        ));
    }
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return bad("the answer is empty".to_string());
    }
    let (body, fenced) = match unfence(trimmed) {
        Some(inner) => (inner, true),
        None => (trimmed, false),
    };
    let value: Value = match serde_json::from_str(body) {
        Ok(v) => v,
        Err(e) if e.is_syntax() || e.is_eof() => {
            // Distinguish "an object, then something" from "not JSON at all".
            let mut it = serde_json::Deserializer::from_str(body).into_iter::<Value>();
            return match it.next() {
                Some(Ok(_)) => bad(format!(
                    "not one object: something follows the first JSON value ({e}); a verdict is \
                     one object and no prose"
                )),
                _ => bad(format!("not JSON ({e}); a verdict is one JSON object")),
            };
        }
        Err(e) => return bad(format!("not JSON ({e})")),
    };
    if !value.is_object() {
        return bad(format!(
            "not one object: the answer is a JSON {}",
            kind_of(&value)
        ));
    }
    let strict: Strict = match serde_json::from_str(body) {
        Ok(s) => s,
        Err(e) => {
            return bad(format!(
                "not the verdict's shape ({e}); exactly {{\"verdict\", \"lens\", \"findings\"}}"
            ));
        }
    };
    if strict.findings.len() > MAX_FINDINGS {
        return bad(format!(
            "{} findings, over the {MAX_FINDINGS} a verdict may list",
            strict.findings.len()
        ));
    }
    for (i, f) in strict.findings.iter().enumerate() {
        let n = f.claim.chars().count();
        if f.claim.trim().is_empty() || n > MAX_CLAIM_CHARS {
            return bad(format!(
                "finding {} has a claim of {n} characters (1..={MAX_CLAIM_CHARS})",
                i + 1
            ));
        }
        let n = f.evidence.chars().count();
        if n > MAX_EVIDENCE_CHARS {
            return bad(format!(
                "finding {} has evidence of {n} characters (at most {MAX_EVIDENCE_CHARS})",
                i + 1
            ));
        }
    }
    if strict.lens != lens {
        return Judged::OffLens {
            answered: strict.lens,
            raw_tail: raw_tail(text),
        };
    }
    let verdict = Verdict {
        verdict: strict.verdict,
        lens: strict.lens,
        findings: strict
            .findings
            .into_iter()
            .map(|f| Finding {
                severity: f.severity,
                claim: f.claim,
                evidence: f.evidence,
            })
            .collect(),
    };
    let mut notes = Vec::new();
    if fenced {
        notes.push(
            "the answer was one object inside a code fence: accepted (the fence is markup, not \
             prose)"
                .to_string(),
        );
    }
    let mut counted = verdict.verdict;
    if verdict.verdict == Word::Pass {
        let heavy: Vec<&str> = [Severity::Blocker, Severity::Major]
            .into_iter()
            .filter(|s| verdict.findings.iter().any(|f| f.severity == *s))
            .map(Severity::as_str)
            .collect();
        if !heavy.is_empty() {
            counted = Word::Refuse;
            notes.push(format!(
                "a pass listing a {} finding counts as refuse",
                heavy.join(" and a ")
            ));
        }
    }
    let bare = counted == Word::Pass
        && verdict
            .findings
            .iter()
            .all(|f| f.evidence.trim().is_empty());
    if bare {
        notes.push(
            "a bare pass (no finding carries evidence): it counts, never as the only evidence"
                .to_string(),
        );
    }
    Judged::Verdict {
        verdict,
        counted,
        notes,
        bare,
    }
}

/// The object inside one whole-answer Markdown fence (```` ``` ```` or ```` ```json ````).
fn unfence(t: &str) -> Option<&str> {
    let rest = t.strip_prefix("```")?;
    let (info, rest) = rest.split_once('\n')?;
    if !matches!(info.trim(), "" | "json" | "JSON") {
        return None;
    }
    let inner = rest.strip_suffix("```")?;
    if inner.contains("```") {
        return None;
    }
    Some(inner.trim())
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// The verdict's JSON schema for `lens`: strict (`additionalProperties: false` at every
/// level, every key required), `lens` a `const`. Kept to the keywords the structured-output
/// backends accept; the bounds on lengths and counts are [`judge`]'s.
pub fn schema(lens: &str) -> Value {
    json!({
        "title": "tribunal verdict",
        "type": "object",
        "additionalProperties": false,
        "required": ["verdict", "lens", "findings"],
        "properties": {
            "verdict": {"type": "string", "enum": ["pass", "refuse"]},
            "lens": {"type": "string", "const": lens},
            "findings": {
                "type": "array",
                "items": {
                    "type": "object",
                    "additionalProperties": false,
                    "required": ["severity", "claim", "evidence"],
                    "properties": {
                        "severity": {"type": "string", "enum": ["blocker", "major", "minor", "info"]},
                        "claim": {"type": "string"},
                        "evidence": {"type": "string"}
                    }
                }
            }
        }
    })
}

/// The last [`RAW_TAIL_BYTES`] bytes of `text`, starting on a character boundary.
pub fn raw_tail(text: &str) -> String {
    if text.len() <= RAW_TAIL_BYTES {
        return text.to_string();
    }
    let mut at = text.len() - RAW_TAIL_BYTES;
    while !text.is_char_boundary(at) {
        at += 1;
    }
    text[at..].to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict_of(j: &Judged) -> (&Verdict, Word, &[String], bool) {
        match j {
            Judged::Verdict {
                verdict,
                counted,
                notes,
                bare,
            } => (verdict, *counted, notes, *bare),
            other => panic!("not a verdict: {other:?}"),
        }
    }

    fn problem_of(j: &Judged) -> (&str, &str) {
        match j {
            Judged::Bad { problem, raw_tail } => (problem, raw_tail),
            other => panic!("not bad: {other:?}"),
        }
    }

    const PASS: &str = r#"{"verdict": "pass", "lens": "defect", "findings": [{"severity": "info", "claim": "checked the error paths", "evidence": "src/a.rs returns Err on a failed write"}]}"#;

    #[test]
    fn a_strict_pass_for_the_seated_lens_is_a_pass() {
        let j = judge(PASS, "defect");
        let (v, counted, notes, bare) = verdict_of(&j);
        assert_eq!(v.verdict, Word::Pass);
        assert_eq!(v.lens, "defect");
        assert_eq!(v.findings.len(), 1);
        assert_eq!(v.findings[0].severity, Severity::Info);
        assert_eq!(counted, Word::Pass);
        assert!(notes.is_empty(), "{notes:?}");
        assert!(!bare);
        // Whitespace around it is not prose.
        let j = judge(&format!("\n  {PASS}\n\n"), "defect");
        assert_eq!(verdict_of(&j).1, Word::Pass);
    }

    #[test]
    fn a_refuse_with_findings_counts_as_refuse() {
        let t = r#"{"verdict":"refuse","lens":"security","findings":[{"severity":"major","claim":"a token is logged","evidence":"src/log.rs line 4 prints the header"},{"severity":"minor","claim":"x","evidence":""}]}"#;
        let j = judge(t, "security");
        let (v, counted, _, bare) = verdict_of(&j);
        assert_eq!(v.verdict, Word::Refuse);
        assert_eq!(counted, Word::Refuse);
        assert!(!bare);
    }

    #[test]
    fn a_pass_listing_a_blocker_or_major_counts_as_refuse_naming_the_severity() {
        for sev in ["blocker", "major"] {
            let t = format!(
                r#"{{"verdict":"pass","lens":"defect","findings":[{{"severity":"{sev}","claim":"the test asserts a constant","evidence":"tests/a.rs:3"}}]}}"#
            );
            let j = judge(&t, "defect");
            let (v, counted, notes, _) = verdict_of(&j);
            assert_eq!(v.verdict, Word::Pass, "the juror's word is kept as said");
            assert_eq!(counted, Word::Refuse, "{sev}");
            assert!(
                notes
                    .iter()
                    .any(|n| n.contains(sev) && n.contains("refuse")),
                "{notes:?}"
            );
        }
        // Minor and info do not turn a pass.
        let t = r#"{"verdict":"pass","lens":"defect","findings":[{"severity":"minor","claim":"a name","evidence":"a.rs:1"}]}"#;
        assert_eq!(verdict_of(&judge(t, "defect")).1, Word::Pass);
    }

    #[test]
    fn a_pass_with_no_findings_or_no_evidence_is_bare() {
        let t = r#"{"verdict":"pass","lens":"defect","findings":[]}"#;
        let j = judge(t, "defect");
        let (_, counted, _, bare) = verdict_of(&j);
        assert_eq!(counted, Word::Pass);
        assert!(bare);
        let t = r#"{"verdict":"pass","lens":"defect","findings":[{"severity":"info","claim":"looks fine","evidence":"  "}]}"#;
        assert!(verdict_of(&judge(t, "defect")).3);
        assert!(!verdict_of(&judge(PASS, "defect")).3);
        // A refuse is never bare.
        let t = r#"{"verdict":"refuse","lens":"defect","findings":[]}"#;
        let j = judge(t, "defect");
        let (_, counted, _, bare) = verdict_of(&j);
        assert_eq!(counted, Word::Refuse);
        assert!(!bare);
    }

    #[test]
    fn a_verdict_for_another_lens_is_off_lens_with_both_and_a_tail() {
        let t = PASS.replace("\"defect\"", "\"generalist\"");
        match judge(&t, "defect") {
            Judged::OffLens { answered, raw_tail } => {
                assert_eq!(answered, "generalist");
                assert_eq!(raw_tail, t);
            }
            other => panic!("{other:?}"),
        }
        // Literally: case and spaces differ = another lens.
        for other in ["Defect", " defect", "defect "] {
            let t = PASS.replace("\"defect\"", &format!("\"{other}\""));
            assert!(
                matches!(judge(&t, "defect"), Judged::OffLens { ref answered, .. } if answered == other),
                "{other:?}"
            );
        }
    }

    #[test]
    fn garbage_prose_refusals_and_empty_answers_are_bad_with_a_tail() {
        let cases = [
            ("", "empty"),
            ("   \n", "empty"),
            ("{\"verdict\": pa", "not JSON"),
            (
                "I'm sorry, but I can't help with reviewing this.",
                "not JSON",
            ),
            ("[1, 2]", "not one object"),
            ("\"pass\"", "not one object"),
            ("null", "not one object"),
        ];
        for (t, want) in cases {
            let j = judge(t, "defect");
            let (problem, tail) = problem_of(&j);
            assert!(problem.contains(want), "{t:?}: {problem}");
            assert_eq!(tail, t, "{t:?}");
        }
    }

    #[test]
    fn prose_around_the_object_or_a_second_object_is_bad() {
        for t in [
            format!("Here is my verdict: {PASS}"),
            format!("{PASS}\nI checked everything."),
            format!("{PASS}\n{PASS}"),
            format!("{PASS}{{}}"),
        ] {
            let j = judge(&t, "defect");
            let (problem, _) = problem_of(&j);
            assert!(!problem.is_empty(), "{t}");
        }
    }

    #[test]
    fn one_whole_fence_is_accepted_and_noted_anything_more_is_bad() {
        for t in [
            format!("```json\n{PASS}\n```"),
            format!("```\n{PASS}\n```\n"),
        ] {
            let j = judge(&t, "defect");
            let (_, counted, notes, _) = verdict_of(&j);
            assert_eq!(counted, Word::Pass);
            assert!(notes.iter().any(|n| n.contains("fence")), "{notes:?}");
        }
        for t in [
            format!("Verdict:\n```json\n{PASS}\n```"),
            format!("```json\n{PASS}\n```\nDone."),
            format!("```json\n{PASS}\n{PASS}\n```"),
            format!("```json\n{PASS}"),
            format!("```python\n{PASS}\n```"),
        ] {
            let j = judge(&t, "defect");
            assert!(matches!(j, Judged::Bad { .. }), "{t}: {j:?}");
        }
    }

    #[test]
    fn unknown_duplicate_missing_and_mistyped_keys_are_bad() {
        let cases = [
            r#"{"verdict":"pass","lens":"defect","findings":[],"confidence":0.9}"#,
            r#"{"verdict":"pass","lens":"defect","findings":[{"severity":"info","claim":"a","evidence":"b","file":"x"}]}"#,
            r#"{"verdict":"refuse","verdict":"pass","lens":"defect","findings":[]}"#,
            r#"{"verdict":"pass","lens":"defect"}"#,
            r#"{"verdict":"pass","findings":[]}"#,
            r#"{"verdict":"Pass","lens":"defect","findings":[]}"#,
            r#"{"verdict":"approve","lens":"defect","findings":[]}"#,
            r#"{"verdict":true,"lens":"defect","findings":[]}"#,
            r#"{"verdict":"pass","lens":7,"findings":[]}"#,
            r#"{"verdict":"pass","lens":"defect","findings":{}}"#,
            r#"{"verdict":"pass","lens":"defect","findings":[{"severity":"critical","claim":"a","evidence":"b"}]}"#,
            r#"{"verdict":"pass","lens":"defect","findings":[{"severity":"info","claim":"a"}]}"#,
            r#"{"verdict":"pass","lens":"defect","findings":["a finding"]}"#,
        ];
        for t in cases {
            let j = judge(t, "defect");
            let (problem, tail) = problem_of(&j);
            assert!(problem.contains("shape"), "{t}: {problem}");
            assert_eq!(tail, t);
        }
    }

    #[test]
    fn the_bounds_on_findings_claims_evidence_and_answer_hold() {
        let f = |claim: &str, ev: &str| json!({"severity": "info", "claim": claim, "evidence": ev});
        let ok: Vec<Value> = (0..MAX_FINDINGS)
            .map(|i| f(&format!("c{i}"), "e"))
            .collect();
        let t = json!({"verdict": "refuse", "lens": "defect", "findings": ok}).to_string();
        assert!(matches!(judge(&t, "defect"), Judged::Verdict { .. }));
        let over: Vec<Value> = (0..=MAX_FINDINGS)
            .map(|i| f(&format!("c{i}"), "e"))
            .collect();
        let t = json!({"verdict": "refuse", "lens": "defect", "findings": over}).to_string();
        assert!(problem_of(&judge(&t, "defect")).0.contains("findings"));

        let claim = "é".repeat(MAX_CLAIM_CHARS);
        let t = json!({"verdict": "pass", "lens": "defect", "findings": [f(&claim, "e")]});
        assert!(matches!(
            judge(&t.to_string(), "defect"),
            Judged::Verdict { .. }
        ));
        let claim = "é".repeat(MAX_CLAIM_CHARS + 1);
        let t = json!({"verdict": "pass", "lens": "defect", "findings": [f(&claim, "e")]});
        assert!(
            problem_of(&judge(&t.to_string(), "defect"))
                .0
                .contains("claim")
        );
        let t = json!({"verdict": "pass", "lens": "defect", "findings": [f("", "e")]});
        assert!(
            problem_of(&judge(&t.to_string(), "defect"))
                .0
                .contains("claim")
        );
        let ev = "x".repeat(MAX_EVIDENCE_CHARS + 1);
        let t = json!({"verdict": "pass", "lens": "defect", "findings": [f("c", &ev)]});
        assert!(
            problem_of(&judge(&t.to_string(), "defect"))
                .0
                .contains("evidence")
        );

        let big = format!("{}{PASS}", " ".repeat(MAX_ANSWER_BYTES));
        let j = judge(&big, "defect");
        let (problem, tail) = problem_of(&j);
        assert!(problem.contains("bytes"), "{problem}");
        assert!(tail.len() <= RAW_TAIL_BYTES);
    }

    #[test]
    fn raw_tail_keeps_the_last_bytes_on_a_char_boundary() {
        assert_eq!(raw_tail("short"), "short");
        let s = format!("{}{}", "a".repeat(10), "é".repeat(RAW_TAIL_BYTES));
        let t = raw_tail(&s);
        assert!(t.len() <= RAW_TAIL_BYTES && t.len() >= RAW_TAIL_BYTES - 1);
        assert!(s.ends_with(&t));
        assert!(t.chars().all(|c| c == 'é'));
        let s = format!("{}b", "a".repeat(RAW_TAIL_BYTES));
        assert_eq!(raw_tail(&s).len(), RAW_TAIL_BYTES);
        assert!(raw_tail(&s).ends_with('b'));
        // A bad answer's tail is bounded.
        let long = "no ".repeat(RAW_TAIL_BYTES);
        assert!(problem_of(&judge(&long, "defect")).1.len() <= RAW_TAIL_BYTES);
    }

    #[test]
    fn the_schema_is_strict_with_the_lens_a_const() {
        let s = schema("operator-safety");
        assert_eq!(s["type"], "object");
        assert_eq!(s["additionalProperties"], false);
        assert_eq!(s["properties"]["lens"]["const"], "operator-safety");
        assert_eq!(s["required"], json!(["verdict", "lens", "findings"]));
        assert_eq!(
            s["properties"]["verdict"]["enum"],
            json!(["pass", "refuse"])
        );
        let item = &s["properties"]["findings"]["items"];
        assert_eq!(item["additionalProperties"], false);
        assert_eq!(item["required"], json!(["severity", "claim", "evidence"]));
        assert_eq!(
            item["properties"]["severity"]["enum"],
            json!(["blocker", "major", "minor", "info"])
        );
        // What the schema admits, judge admits; the fakes' answers are what it describes.
        for b in [
            crate::tribunal::model::Behaviour::Pass,
            crate::tribunal::model::Behaviour::PassBare,
            crate::tribunal::model::Behaviour::Refuse,
            crate::tribunal::model::Behaviour::PassWithBlocker,
        ] {
            let t = b.answer("operator-safety", true).unwrap();
            assert!(
                matches!(judge(&t, "operator-safety"), Judged::Verdict { .. }),
                "{b:?}"
            );
        }
        let _ = Finding {
            severity: Severity::Info,
            claim: String::new(),
            evidence: String::new(),
        };
    }

    #[test]
    fn the_fakes_wrong_lens_garbage_and_refusal_text_read_as_such() {
        use crate::tribunal::model::Behaviour;
        let t = Behaviour::WrongLens.answer("defect", true).unwrap();
        assert!(
            matches!(judge(&t, "defect"), Judged::OffLens { ref answered, .. } if answered == "generalist")
        );
        for b in [Behaviour::Garbage, Behaviour::RefusalText] {
            let t = b.answer("defect", true).unwrap();
            assert!(matches!(judge(&t, "defect"), Judged::Bad { .. }), "{b:?}");
        }
        let t = Behaviour::PassWithBlocker.answer("defect", true).unwrap();
        assert_eq!(verdict_of(&judge(&t, "defect")).1, Word::Refuse);
        let t = Behaviour::PassBare.answer("defect", true).unwrap();
        assert!(verdict_of(&judge(&t, "defect")).3);
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Strict {
    verdict: Word,
    lens: String,
    findings: Vec<StrictFinding>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StrictFinding {
    severity: Severity,
    claim: String,
    evidence: String,
}
