//! A limit in a Claude Code transcript: how a PTY run of claude (which has no stdio stream
//! to carry its `result`) says that its last turn ended on an account limit.
//!
//! Claude Code 2.1.332 records an API error as a synthetic assistant line of the
//! transcript (its `createAssistantAPIErrorMessage`, read from the shipped binary):
//! `{"type":"assistant","isApiErrorMessage":true,"error":"rate_limit", "apiError":
//! "usage_limit_reached", "apiErrorParams":{"rate_limit_info":{"status":"rejected",
//! "resetsAt":UNIX,"rateLimitType":"five_hour",…}}, "message":{"model":"<synthetic>",
//! "content":[{"type":"text","text":"…"}],…},…}`. The plan's allocation used up carries
//! `apiError: "usage_limit_reached"`; a plain HTTP 429 only `error: "rate_limit"` (a line
//! relayed from elsewhere may carry `apiErrorStatus: 429` instead). Only these make a
//! limit, as the seed says of claude's result: any other API error says nothing of one.
//!
//! The HTTP 429 line is **recorded** (claude 2.1.332's PTY form against a local stub that
//! answers 429: `error: "rate_limit"`, `apiErrorStatus: 429`, `apiErrorType:
//! "rate_limit_error"`; tests/data/real/records/). The `usage_limit_reached` line is the
//! binary's code, not a recorded limit: claude writes it only for a subscription login that
//! hit its plan's window, which an API key and a stub do not reach. `quotaLimits`, which
//! claude adds to some of these lines, is not read.

use serde_json::Value;

use crate::providers::protocol::LimitKind;

/// How the transcript's last turn ended, as its last assistant line says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LastTurn {
    /// An API error line that is a limit; `resets_at` is the rejected window's reset (Unix
    /// seconds) when the line names one.
    Limit {
        kind: LimitKind,
        resets_at: Option<i64>,
    },
    /// An API error line of another kind (no login, an overloaded service, …).
    ApiError,
    /// A reply of the model.
    Reply,
}

/// The last assistant line of the main conversation (sub-agents' lines are not its turns),
/// read as [`LastTurn`]; `None` when the transcript has no assistant line.
pub fn last_turn(bytes: &[u8]) -> Option<LastTurn> {
    let last = super::json_lines(bytes)
        .filter(|v| v.get("type").and_then(Value::as_str) == Some("assistant"))
        .filter(|v| v.get("isSidechain").and_then(Value::as_bool) != Some(true))
        .last()?;
    Some(classify(&last))
}

fn classify(v: &Value) -> LastTurn {
    if v.get("isApiErrorMessage").and_then(Value::as_bool) != Some(true) {
        return LastTurn::Reply;
    }
    let word = |k: &str| v.get(k).and_then(Value::as_str);
    let info = v.pointer("/apiErrorParams/rate_limit_info");
    let rejected = info
        .filter(|i| i.get("status").and_then(Value::as_str) == Some("rejected"))
        .map(|i| i.get("resetsAt").and_then(Value::as_i64));
    let kind = if word("apiError") == Some("usage_limit_reached")
        || word("error") == Some("usage_limit_reached")
    {
        LimitKind::Usage
    } else if word("error") == Some("rate_limit")
        || v.get("apiErrorStatus").and_then(Value::as_i64) == Some(429)
    {
        // As for a stdio turn: a 429 while a plan window was rejected is that window's
        // allocation used up; without one it is the request rate.
        if rejected.is_some() {
            LimitKind::Usage
        } else {
            LimitKind::Rate
        }
    } else {
        return LastTurn::ApiError;
    };
    LastTurn::Limit {
        kind,
        resets_at: rejected.flatten(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(ls: &[&str]) -> Vec<u8> {
        let mut b = ls.join("\n").into_bytes();
        b.push(b'\n');
        b
    }

    const USER: &str = r#"{"type":"user","message":{"role":"user","content":"hi"}}"#;
    const REPLY: &str = r#"{"type":"assistant","message":{"role":"assistant","model":"claude-x","content":[{"type":"text","text":"hello"}]}}"#;
    const USAGE: &str = r#"{"type":"assistant","isApiErrorMessage":true,"error":"rate_limit","apiError":"usage_limit_reached","apiErrorParams":{"rate_limit_info":{"status":"rejected","resetsAt":1771390800,"rateLimitType":"five_hour"}},"message":{"model":"<synthetic>","role":"assistant","content":[{"type":"text","text":"You've hit your limit"}]}}"#;
    const RATE: &str = r#"{"type":"assistant","isApiErrorMessage":true,"error":"rate_limit","message":{"model":"<synthetic>","role":"assistant","content":[{"type":"text","text":"API Error: Rate limit reached"}]}}"#;
    const NO_LOGIN: &str = r#"{"type":"assistant","isApiErrorMessage":true,"error":"authentication_failed","message":{"model":"<synthetic>","role":"assistant","content":[{"type":"text","text":"Invalid API key"}]}}"#;

    #[test]
    fn the_real_claudes_429_line_is_a_rate_limit() {
        // Recorded from claude 2.1.332's PTY form against a local stub answering 429
        // (tests/data/real/records/README.md).
        let bytes = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/real/records/claude-2.1.332-pty-429-stub.jsonl"
        ))
        .unwrap();
        assert_eq!(
            last_turn(&bytes),
            Some(LastTurn::Limit {
                kind: LimitKind::Rate,
                resets_at: None
            })
        );
        // Its "Not logged in" line is an API error, not a limit.
        let no_login = std::fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/data/real/records/claude-2.1.332-turn-no-login.jsonl"
        ))
        .unwrap();
        assert_eq!(last_turn(&no_login), Some(LastTurn::ApiError));
    }

    #[test]
    fn the_last_assistant_line_says_how_the_turn_ended() {
        assert_eq!(last_turn(&lines(&[USER])), None);
        assert_eq!(last_turn(&lines(&[USER, REPLY])), Some(LastTurn::Reply));
        assert_eq!(
            last_turn(&lines(&[USER, REPLY, USER, USAGE])),
            Some(LastTurn::Limit {
                kind: LimitKind::Usage,
                resets_at: Some(1771390800)
            })
        );
        assert_eq!(
            last_turn(&lines(&[USER, RATE])),
            Some(LastTurn::Limit {
                kind: LimitKind::Rate,
                resets_at: None
            })
        );
        // A 429 relayed with its status, and a 429 while a window was rejected.
        let relayed = RATE.replace(r#""error":"rate_limit","#, r#""apiErrorStatus":429,"#);
        assert_eq!(
            last_turn(&lines(&[USER, &relayed])),
            Some(LastTurn::Limit {
                kind: LimitKind::Rate,
                resets_at: None
            })
        );
        let windowed = USAGE.replace(r#""apiError":"usage_limit_reached","#, "");
        assert_eq!(
            last_turn(&lines(&[USER, &windowed])),
            Some(LastTurn::Limit {
                kind: LimitKind::Usage,
                resets_at: Some(1771390800)
            })
        );
        // Another API error is no limit; a later reply ends the limit's turn; the user's
        // retry alone does not.
        assert_eq!(
            last_turn(&lines(&[USER, NO_LOGIN])),
            Some(LastTurn::ApiError)
        );
        assert_eq!(
            last_turn(&lines(&[USER, USAGE, USER, REPLY])),
            Some(LastTurn::Reply)
        );
        assert!(matches!(
            last_turn(&lines(&[USAGE, USER])),
            Some(LastTurn::Limit { .. })
        ));
        // A sub-agent's line, a torn last line, a snake_case flag: not the main turn's word.
        let side = USAGE.replace(
            r#""type":"assistant","#,
            r#""type":"assistant","isSidechain":true,"#,
        );
        assert_eq!(last_turn(&lines(&[REPLY, &side])), Some(LastTurn::Reply));
        let torn = &USAGE[..USAGE.len() - 5];
        assert_eq!(last_turn(&lines(&[REPLY, torn])), Some(LastTurn::Reply));
        let snake = USAGE.replace("isApiErrorMessage", "is_api_error_message");
        assert_eq!(last_turn(&lines(&[&snake])), Some(LastTurn::Reply));
        // A window that is not rejected names no reset.
        let allowed = USAGE.replace(r#""status":"rejected""#, r#""status":"allowed""#);
        assert_eq!(
            last_turn(&lines(&[&allowed])),
            Some(LastTurn::Limit {
                kind: LimitKind::Usage,
                resets_at: None
            })
        );
    }
}
