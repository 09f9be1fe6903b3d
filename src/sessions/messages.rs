//! `GET /runs/{ref}/messages`: a run's conversation as its tool recorded it
//! ([`crate::providers::records`]), in pages (seed 002). Pure: the query is checked here and
//! a page is made from the messages read; the manager reads the record and audits.
//!
//! A message's `id` is its position (from 1) among all the messages of the session, both
//! roles, in the record's order: it never changes as the transcript grows (the record is
//! appended to, and a line is a message or not by itself).

use serde::{Deserialize, Serialize};

use crate::providers::records::{Message, Read};
pub use crate::providers::records::{Role, TranscriptState};

use super::SessionError;

/// The longest `q`, in bytes.
pub const MAX_Q: usize = 256;
/// The largest `limit`.
pub const MAX_LIMIT: usize = 200;
/// The page size without `limit`.
pub const DEFAULT_LIMIT: usize = 50;
/// The most messages of a `text=1` page.
pub const MAX_TEXT_PAGE: usize = 50;
/// The most bytes of one message's `text`; a longer one is cut and ends with [`CLIP_MARK`].
pub const MAX_TEXT: usize = 64 * 1024;
/// What ends a text cut at [`MAX_TEXT`].
pub const CLIP_MARK: &str = "[...]";
/// The most bytes of a `first_line`.
pub const MAX_FIRST_LINE: usize = 512;

/// The query of `GET /runs/{ref}/messages`, as given (every value is checked by
/// [`Query::parse`]: a wrong one is 400, never ignored).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
pub struct MessagesQuery {
    /// `user` (default: what the person sent), `assistant`, or `all`.
    pub role: Option<String>,
    /// Keep the messages containing this, anywhere, case-insensitively (at most 256 bytes).
    pub q: Option<String>,
    /// RFC 3339: keep the messages at this time or later (the first item is the anchor).
    pub at: Option<String>,
    /// `asc` (default: the page starts at the oldest) or `desc` (at the newest). Items are
    /// always oldest first.
    pub order: Option<String>,
    /// 1 to 200 (default 50; a `text=1` page holds at most 50).
    pub limit: Option<String>,
    /// The `next` of the previous page: the id the page continues from.
    pub cursor: Option<String>,
    /// Read one message whole (its `text` and `later_same`); no filter applies.
    pub id: Option<String>,
    /// `1`: each item carries its `text` (at most 64 KiB, then `[...]` and `clipped`).
    pub text: Option<String>,
}

/// Which roles a page keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RoleFilter {
    User,
    Assistant,
    All,
}

/// A checked query.
#[derive(Debug, Clone, PartialEq)]
pub struct Query {
    pub role: RoleFilter,
    /// Lowercased.
    pub q: Option<String>,
    pub at: Option<chrono::DateTime<chrono::FixedOffset>>,
    pub desc: bool,
    pub limit: usize,
    pub cursor: Option<u64>,
    pub id: Option<u64>,
    pub text: bool,
}

fn bad(what: String) -> SessionError {
    SessionError::BadRequest(what)
}

fn number(name: &str, v: &str) -> Result<u64, SessionError> {
    v.parse::<u64>().map_err(|_| {
        bad(format!(
            "{name} must be a whole number (a message id, as `next` or an item gives it); got {}",
            crate::text::one_line(v, 40)
        ))
    })
}

impl Query {
    /// Checks every parameter: 400 (naming it) for one that is not valid.
    pub fn parse(m: &MessagesQuery) -> Result<Query, SessionError> {
        let role = match m.role.as_deref() {
            None | Some("user") => RoleFilter::User,
            Some("assistant") => RoleFilter::Assistant,
            Some("all") => RoleFilter::All,
            Some(o) => {
                return Err(bad(format!(
                    "role is user, assistant or all; got {}",
                    crate::text::one_line(o, 40)
                )));
            }
        };
        let q = match &m.q {
            Some(q) if q.len() > MAX_Q => {
                return Err(bad(format!(
                    "q is at most {MAX_Q} bytes; this one is {} bytes",
                    q.len()
                )));
            }
            Some(q) if !q.is_empty() => Some(q.to_lowercase()),
            _ => None,
        };
        let at = match &m.at {
            Some(a) => Some(chrono::DateTime::parse_from_rfc3339(a).map_err(|_| {
                bad(format!(
                    "at must be an RFC 3339 time, e.g. 2026-12-03T14:00:00Z; got {}",
                    crate::text::one_line(a, 60)
                ))
            })?),
            None => None,
        };
        let desc = match m.order.as_deref() {
            None | Some("asc") => false,
            Some("desc") => true,
            Some(o) => {
                return Err(bad(format!(
                    "order is asc or desc; got {}",
                    crate::text::one_line(o, 40)
                )));
            }
        };
        let text = match m.text.as_deref() {
            None | Some("0") | Some("false") => false,
            Some("1") | Some("true") => true,
            Some(o) => {
                return Err(bad(format!(
                    "text is 1 (or 0); got {}",
                    crate::text::one_line(o, 40)
                )));
            }
        };
        let limit = match &m.limit {
            None => DEFAULT_LIMIT,
            Some(l) => {
                let n = number("limit", l)?;
                if n == 0 || n > MAX_LIMIT as u64 {
                    return Err(bad(format!(
                        "limit is 1 to {MAX_LIMIT}; got {n}. Remedy: follow `next` for more"
                    )));
                }
                n as usize
            }
        };
        let limit = if text {
            limit.min(MAX_TEXT_PAGE)
        } else {
            limit
        };
        let cursor = m
            .cursor
            .as_deref()
            .map(|c| number("cursor", c))
            .transpose()?;
        let id = m.id.as_deref().map(|i| number("id", i)).transpose()?;
        if id == Some(0) {
            return Err(bad("id starts at 1".into()));
        }
        Ok(Query {
            role,
            q,
            at,
            desc,
            limit,
            cursor,
            id,
            text,
        })
    }
}

/// One message of a page.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct MessageItem {
    /// Its position among the session's messages (from 1); stable as the transcript grows.
    pub id: u64,
    pub role: Role,
    /// The record's time of it (RFC 3339), when the record gives one.
    pub at: Option<String>,
    /// Its first non-blank line (at most 512 bytes), as the tool recorded it: not sanitised.
    pub first_line: String,
    /// The whole text, with `text=1` or an `id` read (at most 64 KiB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// True when `text` was cut at 64 KiB (it then ends with `[...]`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub clipped: bool,
    /// With an `id` read: how many later messages of the same role repeat its first line.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub later_same: Option<u64>,
}

/// `GET /runs/{ref}/messages`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct MessagePage {
    #[serde(rename = "ref")]
    pub run_ref: String,
    /// Oldest first, whatever the order.
    pub items: Vec<MessageItem>,
    /// How many messages the filters keep (with `id`: the session's messages); null when
    /// the record could not be read (`transcript: unreadable`): unknown, not zero.
    pub total: Option<u64>,
    /// The cursor of the next page (an id), when there is one.
    pub next: Option<String>,
    /// Where the tool's record stands: read, pending (not written yet), missing (should be
    /// there and is not) or unreadable (`reason` says why).
    pub transcript: TranscriptState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The first non-blank line of `text`, bounded.
pub fn first_line(text: &str) -> String {
    let line = text
        .lines()
        .map(|l| l.trim_end_matches('\r'))
        .find(|l| !l.trim().is_empty())
        .unwrap_or("");
    cut(line, MAX_FIRST_LINE).0.to_string()
}

/// `s` cut to at most `max` bytes on a character boundary, and whether it was cut.
fn cut(s: &str, max: usize) -> (&str, bool) {
    if s.len() <= max {
        return (s, false);
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    (&s[..end], true)
}

/// The text of an item: at most [`MAX_TEXT`] bytes with the mark included.
fn clipped_text(text: &str) -> (String, bool) {
    if text.len() <= MAX_TEXT {
        return (text.to_string(), false);
    }
    let (head, _) = cut(text, MAX_TEXT - CLIP_MARK.len());
    (format!("{head}{CLIP_MARK}"), true)
}

fn item(id: u64, m: &Message, with_text: bool) -> MessageItem {
    let (text, clipped) = if with_text {
        let (t, c) = clipped_text(&m.text);
        (Some(t), c)
    } else {
        (None, false)
    };
    MessageItem {
        id,
        role: m.role,
        at: m.at.clone(),
        first_line: first_line(&m.text),
        text,
        clipped,
        later_same: None,
    }
}

fn keeps(q: &Query, m: &Message) -> bool {
    let role_ok = match q.role {
        RoleFilter::All => true,
        RoleFilter::User => m.role == Role::User,
        RoleFilter::Assistant => m.role == Role::Assistant,
    };
    let q_ok =
        q.q.as_ref()
            .is_none_or(|needle| m.text.to_lowercase().contains(needle.as_str()));
    let at_ok = q.at.is_none_or(|t| {
        m.at.as_deref()
            .and_then(|a| chrono::DateTime::parse_from_rfc3339(a).ok())
            .is_some_and(|a| a >= t)
    });
    role_ok && q_ok && at_ok
}

/// The page `q` asks for of a record read. 404 for an `id` the session does not have.
pub fn page(run_ref: &str, read: &Read, q: &Query) -> Result<MessagePage, SessionError> {
    let all = &read.messages;
    let known = read.state != TranscriptState::Unreadable;
    let mut out = MessagePage {
        run_ref: run_ref.to_string(),
        items: Vec::new(),
        total: known.then_some(0),
        next: None,
        transcript: read.state,
        reason: read.reason.clone(),
    };
    if let Some(id) = q.id {
        let Some(m) = usize::try_from(id - 1).ok().and_then(|i| all.get(i)) else {
            return Err(SessionError::NotFound(format!(
                "message {id} of run {run_ref} (the session has {} messages; transcript {})",
                all.len(),
                read.state.as_str()
            )));
        };
        let mut it = item(id, m, true);
        let first = first_line(&m.text);
        it.later_same = Some(
            all[id as usize..]
                .iter()
                .filter(|o| o.role == m.role && first_line(&o.text) == first)
                .count() as u64,
        );
        out.items.push(it);
        out.total = Some(all.len() as u64);
        return Ok(out);
    }
    let kept: Vec<(u64, &Message)> = all
        .iter()
        .enumerate()
        .map(|(i, m)| (i as u64 + 1, m))
        .filter(|(_, m)| keeps(q, m))
        .collect();
    if known {
        out.total = Some(kept.len() as u64);
    }
    let page: Vec<(u64, &Message)> = if q.desc {
        let before: Vec<_> = kept
            .iter()
            .filter(|(id, _)| q.cursor.is_none_or(|c| *id < c))
            .collect();
        let start = before.len().saturating_sub(q.limit);
        if start > 0 {
            out.next = Some(before[start].0.to_string());
        }
        before[start..].iter().map(|p| **p).collect()
    } else {
        let after: Vec<_> = kept
            .iter()
            .filter(|(id, _)| q.cursor.is_none_or(|c| *id > c))
            .collect();
        let n = after.len().min(q.limit);
        if n < after.len() && n > 0 {
            out.next = Some(after[n - 1].0.to_string());
        }
        after[..n].iter().map(|p| **p).collect()
    };
    out.items = page
        .into_iter()
        .map(|(id, m)| item(id, m, q.text))
        .collect();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(role: Role, at: &str, text: &str) -> Message {
        Message {
            role,
            at: Some(at.into()),
            text: text.into(),
        }
    }

    fn read(messages: Vec<Message>) -> Read {
        Read {
            state: TranscriptState::Read,
            path: None,
            reason: None,
            messages,
        }
    }

    fn conv() -> Read {
        use Role::*;
        read(vec![
            msg(User, "2026-12-03T10:00:00Z", "Fix the Parser\nplease"),
            msg(Assistant, "2026-12-03T10:00:05Z", "done: parser fixed"),
            msg(User, "2026-12-03T10:01:00Z", "\n\nrun the tests"),
            msg(Assistant, "2026-12-03T10:01:05Z", "tests pass"),
            msg(User, "2026-12-03T10:02:00Z", "Fix the Parser\nagain"),
            msg(User, "2026-12-03T10:03:00Z", "thanks"),
        ])
    }

    fn q(pairs: &[(&str, &str)]) -> Result<Query, SessionError> {
        let mut m = MessagesQuery::default();
        for (k, v) in pairs {
            let v = Some(v.to_string());
            match *k {
                "role" => m.role = v,
                "q" => m.q = v,
                "at" => m.at = v,
                "order" => m.order = v,
                "limit" => m.limit = v,
                "cursor" => m.cursor = v,
                "id" => m.id = v,
                "text" => m.text = v,
                _ => unreachable!(),
            }
        }
        Query::parse(&m)
    }

    fn ids(p: &MessagePage) -> Vec<u64> {
        p.items.iter().map(|i| i.id).collect()
    }

    #[test]
    fn by_default_only_the_persons_messages_with_their_session_positions() {
        let p = page("run-1", &conv(), &q(&[]).unwrap()).unwrap();
        assert_eq!(ids(&p), [1, 3, 5, 6]);
        assert_eq!(p.total, Some(4));
        assert_eq!(p.items[0].first_line, "Fix the Parser");
        assert_eq!(p.items[1].first_line, "run the tests");
        assert!(p.items[0].text.is_none());
        let all = page("run-1", &conv(), &q(&[("role", "all")]).unwrap()).unwrap();
        assert_eq!(ids(&all), [1, 2, 3, 4, 5, 6]);
    }

    #[test]
    fn q_at_order_limit_and_cursor() {
        let p = page(
            "r",
            &conv(),
            &q(&[("role", "all"), ("q", "PARSER")]).unwrap(),
        )
        .unwrap();
        assert_eq!(ids(&p), [1, 2, 5]);
        let p = page("r", &conv(), &q(&[("at", "2026-12-03T10:01:00Z")]).unwrap()).unwrap();
        assert_eq!(ids(&p), [3, 5, 6]);
        // asc pages: 1,3 then 5,6.
        let p = page("r", &conv(), &q(&[("limit", "2")]).unwrap()).unwrap();
        assert_eq!((ids(&p), p.next.as_deref()), (vec![1, 3], Some("3")));
        let p = page(
            "r",
            &conv(),
            &q(&[("limit", "2"), ("cursor", "3")]).unwrap(),
        )
        .unwrap();
        assert_eq!((ids(&p), p.next.as_deref()), (vec![5, 6], None));
        // desc pages start at the newest, items still oldest first.
        let p = page(
            "r",
            &conv(),
            &q(&[("limit", "3"), ("order", "desc")]).unwrap(),
        )
        .unwrap();
        assert_eq!((ids(&p), p.next.as_deref()), (vec![3, 5, 6], Some("3")));
        let p = page(
            "r",
            &conv(),
            &q(&[("limit", "3"), ("order", "desc"), ("cursor", "3")]).unwrap(),
        )
        .unwrap();
        assert_eq!((ids(&p), p.next.as_deref()), (vec![1], None));
    }

    #[test]
    fn an_id_read_is_whole_unfiltered_and_counts_later_repeats() {
        let p = page(
            "r",
            &conv(),
            &q(&[("id", "1"), ("role", "assistant"), ("q", "zzz")]).unwrap(),
        )
        .unwrap();
        assert_eq!(ids(&p), [1]);
        assert_eq!(p.items[0].text.as_deref(), Some("Fix the Parser\nplease"));
        assert_eq!(p.items[0].later_same, Some(1));
        assert_eq!(p.total, Some(6));
        assert!(matches!(
            page("r", &conv(), &q(&[("id", "7")]).unwrap()),
            Err(SessionError::NotFound(_))
        ));
    }

    #[test]
    fn text_pages_clip_at_64_kib_and_hold_at_most_50() {
        let long = "é".repeat(40 * 1024); // 80 KiB
        let r = read(vec![msg(Role::User, "2026-12-03T10:00:00Z", &long)]);
        let p = page("r", &r, &q(&[("text", "1")]).unwrap()).unwrap();
        let t = p.items[0].text.as_deref().unwrap();
        assert!(t.len() <= MAX_TEXT && t.ends_with("[...]"));
        assert!(p.items[0].clipped);
        assert!(p.items[0].later_same.is_none());
        assert_eq!(q(&[("text", "1"), ("limit", "200")]).unwrap().limit, 50);
        let p = page("r", &r, &q(&[("id", "1")]).unwrap()).unwrap();
        assert!(p.items[0].clipped);
    }

    #[test]
    fn invalid_parameters_are_refused() {
        let long_q = "a".repeat(257);
        for bad in [
            vec![("q", long_q.as_str())],
            vec![("limit", "201")],
            vec![("limit", "0")],
            vec![("limit", "99999999999999999999999")],
            vec![("cursor", "abc")],
            vec![("cursor", "-1")],
            vec![("id", "x")],
            vec![("id", "0")],
            vec![("at", "yesterday")],
            vec![("order", "up")],
            vec![("role", "tool")],
            vec![("text", "yes")],
        ] {
            assert!(
                matches!(q(&bad), Err(SessionError::BadRequest(_))),
                "{bad:?}"
            );
        }
        assert!(q(&[("q", &"a".repeat(256))]).is_ok());
    }

    #[test]
    fn ids_stay_as_the_transcript_grows() {
        let mut r = conv();
        let before = page("r", &r, &q(&[("role", "all")]).unwrap()).unwrap();
        r.messages
            .push(msg(Role::User, "2026-12-03T10:09:00Z", "more"));
        let after = page("r", &r, &q(&[("role", "all")]).unwrap()).unwrap();
        assert_eq!(after.items[..6], before.items[..]);
        assert_eq!(after.items[6].id, 7);
    }

    #[test]
    fn an_unreadable_record_has_no_total() {
        let r = Read {
            state: TranscriptState::Unreadable,
            path: None,
            reason: Some("it is a FIFO".into()),
            messages: vec![],
        };
        let p = page("r", &r, &q(&[]).unwrap()).unwrap();
        assert_eq!((p.total, p.transcript), (None, TranscriptState::Unreadable));
        assert_eq!(p.reason.as_deref(), Some("it is a FIFO"));
    }
}
