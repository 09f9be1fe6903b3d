//! The coordination bus: actors, messages, acknowledgements, handoffs and heartbeats,
//! each one event of a log in the ledger's format (`proctor-ledger/1`: canonical JSON
//! lines, `seq`, `at`, `kind`, `prev` chain) at `<data-dir>/events.jsonl`, written through
//! [`crate::ledger::Ledger`]. `proctor ledger verify FILE` recomputes its fixed point.
//!
//! There is no second state: every question (who is registered, what a message says,
//! what is in an inbox) is answered by folding the log ([`fold_bytes`]). A verb checks its
//! arguments against that fold and appends one event.
//!
//! What an acknowledgement means is fixed ([`ACK_MEANING`]): receipt only. A handoff is a
//! message that transfers no authority (`authorityTransferred: []`); one that tries to
//! transfer any is refused, so none is ever recorded by this bus.

use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::{Map, Value, json};

use crate::files::{self, FilesError};
use crate::ledger::{Ledger, LedgerError};

/// The log's file name inside the data dir.
pub const EVENTS_FILE: &str = "events.jsonl";
/// What an acknowledgement means, recorded with each one.
pub const ACK_MEANING: &str = "receipt only; not agreement, approval, or completion";
/// The verbs of this bus, sorted: exactly the public verbs of [`Bus`].
pub const TOOL_SURFACE: [&str; 6] = ["ack", "handoff", "heartbeat", "inbox", "register", "send"];

/// The event kinds the bus writes.
pub mod kind {
    pub const REGISTERED: &str = "factory.actor.registered";
    pub const SENT: &str = "factory.message.sent";
    pub const HANDOFF: &str = "factory.handoff.sent";
    pub const ACKED: &str = "factory.message.acked";
    pub const HEARTBEAT: &str = "factory.actor.heartbeat";
    pub const INBOX_READ: &str = "factory.inbox.read";
}

/// What can go wrong on the bus.
#[derive(Debug, thiserror::Error)]
pub enum BusError {
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error(transparent)]
    Files(#[from] FilesError),
    #[error("cannot read {path}: {err}")]
    Io { path: PathBuf, err: io::Error },
    #[error(
        "{path} already holds events: a coordination log is never appended to by another \
         run. Remedy: give --data-dir a new or empty folder, or leave it out to get a fresh \
         numbered one"
    )]
    Occupied { path: PathBuf },
    #[error("no actor {0} is registered on this bus")]
    UnknownActor(String),
    #[error("no message {0} on this bus")]
    UnknownMessage(String),
    #[error("{0} cannot send a message to itself")]
    ToSelf(String),
    #[error("{0:?} is not a correlation id (cor-NNNN)")]
    BadCorrelation(String),
    #[error("a handoff transfers no authority; refused a handoff that would transfer {0:?}")]
    AuthorityRefused(Vec<String>),
    #[error("only {to}, the recipient of {message}, acknowledges its receipt; not {by}")]
    NotRecipient {
        message: String,
        to: String,
        by: String,
    },
    #[error("{message} is already acknowledged by {by}")]
    AlreadyAcked { message: String, by: String },
    #[error("event {seq} ({kind}) is not a valid factory event: {detail}")]
    BadEvent {
        seq: u64,
        kind: String,
        detail: String,
    },
}

/// The role an actor registers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Coordinator,
    Builder,
    Reviewer,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Coordinator => "coordinator",
            Role::Builder => "builder",
            Role::Reviewer => "reviewer",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        [Role::Coordinator, Role::Builder, Role::Reviewer]
            .into_iter()
            .find(|r| r.as_str() == s)
    }
}

/// A registered actor.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Actor {
    pub id: String,
    pub role: Role,
    pub seq: u64,
}

/// A message or a handoff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Message {
    pub id: String,
    pub from: String,
    pub to: String,
    pub correlation_id: String,
    pub body: String,
    /// `Some` for a handoff: the authority it transfers (always empty on this bus).
    pub authority_transferred: Option<Vec<String>>,
    pub seq: u64,
}

impl Message {
    pub fn is_handoff(&self) -> bool {
        self.authority_transferred.is_some()
    }
}

/// An acknowledgement of receipt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Ack {
    pub message_id: String,
    pub acked_by: String,
    pub meaning: String,
    pub seq: u64,
}

/// A heartbeat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Heartbeat {
    pub actor: String,
    pub seq: u64,
}

/// A recorded inbox read: which messages the actor saw.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InboxRead {
    pub actor: String,
    pub messages: Vec<String>,
    pub seq: u64,
}

/// One message in an actor's inbox.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InboxEntry {
    pub message_id: String,
    pub from: String,
    pub correlation_id: String,
    pub body: String,
    pub handoff: bool,
    pub acked: bool,
}

/// The log folded: everything the bus knows, in log order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Folded {
    pub actors: Vec<Actor>,
    pub messages: Vec<Message>,
    pub acks: Vec<Ack>,
    pub heartbeats: Vec<Heartbeat>,
    pub inbox_reads: Vec<InboxRead>,
    /// Every line of the log, factory events or not.
    pub events: u64,
}

impl Folded {
    pub fn actor(&self, id: &str) -> Option<&Actor> {
        self.actors.iter().find(|a| a.id == id)
    }

    pub fn message(&self, id: &str) -> Option<&Message> {
        self.messages.iter().find(|m| m.id == id)
    }

    /// The messages sent to `actor`, oldest first, with whether it acknowledged each.
    pub fn inbox(&self, actor: &str) -> Vec<InboxEntry> {
        self.messages
            .iter()
            .filter(|m| m.to == actor)
            .map(|m| InboxEntry {
                message_id: m.id.clone(),
                from: m.from.clone(),
                correlation_id: m.correlation_id.clone(),
                body: m.body.clone(),
                handoff: m.is_handoff(),
                acked: self
                    .acks
                    .iter()
                    .any(|a| a.message_id == m.id && a.acked_by == actor),
            })
            .collect()
    }
}

/// Folds the bytes of a log. Lines of other kinds (a `ledger.*` recovery record) count as
/// events and are otherwise skipped; a `factory.*` line that is not one of [`kind`] with
/// its fields is refused. Only complete (LF-terminated) lines are read; whether the chain
/// holds is [`crate::ledger::verify`]'s question, not this one's.
pub fn fold_bytes(bytes: &[u8]) -> Result<Folded, BusError> {
    let mut f = Folded::default();
    for (i, line) in bytes.split_inclusive(|&b| b == b'\n').enumerate() {
        if line.last() != Some(&b'\n') {
            break;
        }
        f.events += 1;
        let seq_hint = i as u64 + 1;
        let bad = |kind: &str, detail: String| BusError::BadEvent {
            seq: seq_hint,
            kind: kind.to_string(),
            detail,
        };
        let v: Value = serde_json::from_slice(line).map_err(|e| bad("?", e.to_string()))?;
        let Value::Object(m) = v else {
            return Err(bad("?", "not a JSON object".into()));
        };
        let k = m
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let seq = m.get("seq").and_then(Value::as_u64).unwrap_or(seq_hint);
        if !k.starts_with("factory.") {
            continue;
        }
        let s = |name: &str| -> Result<String, BusError> {
            m.get(name)
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| bad(&k, format!("no string field {name:?}")))
        };
        let strings = |name: &str| -> Result<Vec<String>, BusError> {
            let arr = m
                .get(name)
                .and_then(Value::as_array)
                .ok_or_else(|| bad(&k, format!("no array field {name:?}")))?;
            arr.iter()
                .map(|x| {
                    x.as_str()
                        .map(str::to_string)
                        .ok_or_else(|| bad(&k, format!("{name:?} holds a non-string")))
                })
                .collect()
        };
        match k.as_str() {
            kind::REGISTERED => {
                let role = s("role")?;
                let role =
                    Role::parse(&role).ok_or_else(|| bad(&k, format!("unknown role {role:?}")))?;
                f.actors.push(Actor {
                    id: s("actor")?,
                    role,
                    seq,
                });
            }
            kind::SENT | kind::HANDOFF => {
                let authority_transferred = if k == kind::HANDOFF {
                    Some(strings("authorityTransferred")?)
                } else {
                    None
                };
                f.messages.push(Message {
                    id: s("message")?,
                    from: s("from")?,
                    to: s("to")?,
                    correlation_id: s("correlationId")?,
                    body: s("body")?,
                    authority_transferred,
                    seq,
                });
            }
            kind::ACKED => f.acks.push(Ack {
                message_id: s("message")?,
                acked_by: s("by")?,
                meaning: s("meaning")?,
                seq,
            }),
            kind::HEARTBEAT => f.heartbeats.push(Heartbeat {
                actor: s("actor")?,
                seq,
            }),
            kind::INBOX_READ => f.inbox_reads.push(InboxRead {
                actor: s("actor")?,
                messages: strings("messages")?,
                seq,
            }),
            _ => return Err(bad(&k, "not a kind of the coordination bus".into())),
        }
    }
    Ok(f)
}

/// Reads and folds the log at `path`.
pub fn fold_file(path: &Path) -> Result<Folded, BusError> {
    let mut bytes = Vec::new();
    files::open_private_read(path)?
        .read_to_end(&mut bytes)
        .map_err(|err| BusError::Io {
            path: path.to_path_buf(),
            err,
        })?;
    fold_bytes(&bytes)
}

/// The bus: the single writer of one log.
#[derive(Debug)]
pub struct Bus {
    ledger: Ledger,
}

impl Bus {
    /// Creates the bus in `dir` (made a private 0700 folder): a new `events.jsonl`, or an
    /// existing empty one. A log that already holds anything is refused
    /// ([`BusError::Occupied`]), never appended to.
    pub fn create(dir: &Path) -> Result<Bus, BusError> {
        files::ensure_private_dir(dir)?;
        let path = dir.join(EVENTS_FILE);
        match fs::symlink_metadata(&path) {
            Ok(m) if m.len() > 0 || !m.file_type().is_file() => {
                return Err(BusError::Occupied { path });
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(err) => return Err(BusError::Io { path, err }),
        }
        let (ledger, _) = Ledger::open(&path)?;
        // Another writer may have filled it between the look and the lock.
        if !ledger.is_empty() {
            return Err(BusError::Occupied { path });
        }
        Ok(Bus { ledger })
    }

    /// The log's path.
    pub fn path(&self) -> &Path {
        self.ledger.path()
    }

    /// The log folded now.
    pub fn fold(&self) -> Result<Folded, BusError> {
        fold_file(self.ledger.path())
    }

    fn append(&mut self, kind: &str, fields: Value) -> Result<u64, BusError> {
        let Value::Object(m) = fields else {
            unreachable!("bus events are objects")
        };
        Ok(self.ledger.append(kind, &m)?)
    }

    fn known_actor<'a>(f: &'a Folded, id: &str) -> Result<&'a Actor, BusError> {
        f.actor(id)
            .ok_or_else(|| BusError::UnknownActor(id.to_string()))
    }

    /// Registers an actor with `role`; returns its id `act-NNNN`.
    pub fn register(&mut self, role: Role) -> Result<String, BusError> {
        let f = self.fold()?;
        let id = format!("act-{:04}", f.actors.len() + 1);
        self.append(
            kind::REGISTERED,
            json!({"actor": id, "role": role.as_str()}),
        )?;
        Ok(id)
    }

    fn post(
        &mut self,
        from: &str,
        to: &str,
        correlation_id: &str,
        body: &str,
        authority: Option<&[String]>,
    ) -> Result<String, BusError> {
        let f = self.fold()?;
        Self::known_actor(&f, from)?;
        Self::known_actor(&f, to)?;
        if from == to {
            return Err(BusError::ToSelf(from.to_string()));
        }
        if !files::valid_id(correlation_id, "cor-") {
            return Err(BusError::BadCorrelation(correlation_id.to_string()));
        }
        let id = format!("msg-{:04}", f.messages.len() + 1);
        let mut fields = Map::new();
        fields.insert("message".into(), id.clone().into());
        fields.insert("from".into(), from.into());
        fields.insert("to".into(), to.into());
        fields.insert("correlationId".into(), correlation_id.into());
        fields.insert("body".into(), body.into());
        let k = match authority {
            Some(a) => {
                if !a.is_empty() {
                    return Err(BusError::AuthorityRefused(a.to_vec()));
                }
                fields.insert("authorityTransferred".into(), json!([]));
                kind::HANDOFF
            }
            None => kind::SENT,
        };
        self.append(k, Value::Object(fields))?;
        Ok(id)
    }

    /// Sends `body` from one registered actor to another; returns its id `msg-NNNN`.
    pub fn send(
        &mut self,
        from: &str,
        to: &str,
        correlation_id: &str,
        body: &str,
    ) -> Result<String, BusError> {
        self.post(from, to, correlation_id, body, None)
    }

    /// Records a handoff: a message that transfers the listed authority, which must be
    /// none ([`BusError::AuthorityRefused`] otherwise). Returns its id `msg-NNNN`.
    pub fn handoff(
        &mut self,
        from: &str,
        to: &str,
        correlation_id: &str,
        body: &str,
        authority: &[String],
    ) -> Result<String, BusError> {
        self.post(from, to, correlation_id, body, Some(authority))
    }

    /// Acknowledges receipt of `message` by its recipient `by`, with [`ACK_MEANING`].
    pub fn ack(&mut self, message: &str, by: &str) -> Result<Ack, BusError> {
        let f = self.fold()?;
        Self::known_actor(&f, by)?;
        let m = f
            .message(message)
            .ok_or_else(|| BusError::UnknownMessage(message.to_string()))?;
        if m.to != by {
            return Err(BusError::NotRecipient {
                message: message.to_string(),
                to: m.to.clone(),
                by: by.to_string(),
            });
        }
        if f.acks
            .iter()
            .any(|a| a.message_id == message && a.acked_by == by)
        {
            return Err(BusError::AlreadyAcked {
                message: message.to_string(),
                by: by.to_string(),
            });
        }
        let seq = self.append(
            kind::ACKED,
            json!({"message": message, "by": by, "meaning": ACK_MEANING}),
        )?;
        Ok(Ack {
            message_id: message.to_string(),
            acked_by: by.to_string(),
            meaning: ACK_MEANING.to_string(),
            seq,
        })
    }

    /// Records that `actor` is alive; returns the event's seq.
    pub fn heartbeat(&mut self, actor: &str) -> Result<u64, BusError> {
        let f = self.fold()?;
        Self::known_actor(&f, actor)?;
        self.append(kind::HEARTBEAT, json!({"actor": actor}))
    }

    /// `actor`'s inbox, folded from the log; the read is recorded with the ids it saw.
    pub fn inbox(&mut self, actor: &str) -> Result<Vec<InboxEntry>, BusError> {
        let f = self.fold()?;
        Self::known_actor(&f, actor)?;
        let entries = f.inbox(actor);
        let ids: Vec<&str> = entries.iter().map(|e| e.message_id.as_str()).collect();
        self.append(kind::INBOX_READ, json!({"actor": actor, "messages": ids}))?;
        Ok(entries)
    }

    /// Closes the log (releases the writer's lock); returns its path.
    pub fn close(self) -> PathBuf {
        self.ledger.path().to_path_buf()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bus() -> (tempfile::TempDir, Bus) {
        let t = tempfile::tempdir().unwrap();
        let b = Bus::create(&t.path().join("d")).unwrap();
        (t, b)
    }

    #[test]
    fn verbs_append_events_that_fold_back_and_verify() {
        let (_t, mut b) = bus();
        let c = b.register(Role::Coordinator).unwrap();
        let w = b.register(Role::Builder).unwrap();
        assert_eq!((c.as_str(), w.as_str()), ("act-0001", "act-0002"));
        let m = b.send(&c, &w, "cor-0001", "hello").unwrap();
        assert_eq!(m, "msg-0001");
        let a = b.ack(&m, &w).unwrap();
        assert_eq!(a.meaning, ACK_MEANING);
        b.heartbeat(&w).unwrap();
        let inbox = b.inbox(&w).unwrap();
        assert_eq!(inbox.len(), 1);
        assert!(inbox[0].acked);
        assert_eq!(inbox[0].body, "hello");
        assert!(b.inbox(&c).unwrap().is_empty());
        let f = b.fold().unwrap();
        assert_eq!(f.events, 7);
        assert_eq!(f.inbox_reads[0].messages, vec!["msg-0001".to_string()]);
        let path = b.close();
        let v = crate::ledger::verify(&path).unwrap();
        assert_eq!(v.fixed_point.events, 7);
    }

    #[test]
    fn a_handoff_that_transfers_authority_is_refused_and_not_recorded() {
        let (_t, mut b) = bus();
        let c = b.register(Role::Coordinator).unwrap();
        let r = b.register(Role::Reviewer).unwrap();
        let e = b
            .handoff(&c, &r, "cor-0001", "take it", &["publish".to_string()])
            .unwrap_err();
        assert!(matches!(e, BusError::AuthorityRefused(_)), "{e}");
        assert!(b.fold().unwrap().messages.is_empty());
        let h = b.handoff(&c, &r, "cor-0001", "take it", &[]).unwrap();
        let f = b.fold().unwrap();
        assert_eq!(f.message(&h).unwrap().authority_transferred, Some(vec![]));
    }

    #[test]
    fn only_the_recipient_acks_and_only_once() {
        let (_t, mut b) = bus();
        let c = b.register(Role::Coordinator).unwrap();
        let w = b.register(Role::Builder).unwrap();
        let m = b.send(&c, &w, "cor-0001", "x").unwrap();
        assert!(matches!(
            b.ack(&m, &c).unwrap_err(),
            BusError::NotRecipient { .. }
        ));
        b.ack(&m, &w).unwrap();
        assert!(matches!(
            b.ack(&m, &w).unwrap_err(),
            BusError::AlreadyAcked { .. }
        ));
        assert!(matches!(
            b.ack("msg-0009", &w).unwrap_err(),
            BusError::UnknownMessage(_)
        ));
    }

    #[test]
    fn bad_arguments_are_refused() {
        let (_t, mut b) = bus();
        let c = b.register(Role::Coordinator).unwrap();
        assert!(matches!(
            b.send(&c, "act-0009", "cor-0001", "x").unwrap_err(),
            BusError::UnknownActor(_)
        ));
        assert!(matches!(
            b.send(&c, &c, "cor-0001", "x").unwrap_err(),
            BusError::ToSelf(_)
        ));
        let w = b.register(Role::Builder).unwrap();
        assert!(matches!(
            b.send(&c, &w, "corr-1", "x").unwrap_err(),
            BusError::BadCorrelation(_)
        ));
        assert!(matches!(
            b.heartbeat("act-0042").unwrap_err(),
            BusError::UnknownActor(_)
        ));
    }

    #[test]
    fn a_log_that_holds_events_is_refused_an_empty_one_is_used() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("d");
        let mut b = Bus::create(&d).unwrap();
        b.register(Role::Builder).unwrap();
        drop(b);
        let e = Bus::create(&d).unwrap_err();
        assert!(matches!(e, BusError::Occupied { .. }), "{e}");
        let before = fs::read(d.join(EVENTS_FILE)).unwrap();
        assert_eq!(fs::read(d.join(EVENTS_FILE)).unwrap(), before);

        let d2 = t.path().join("d2");
        files::ensure_private_dir(&d2).unwrap();
        drop(files::create_private_new(&d2.join(EVENTS_FILE)).unwrap());
        Bus::create(&d2).unwrap();
    }

    #[test]
    fn the_tool_surface_is_sorted_and_unique() {
        let mut s = TOOL_SURFACE.to_vec();
        s.sort_unstable();
        s.dedup();
        assert_eq!(s, TOOL_SURFACE.to_vec());
    }

    #[test]
    fn an_unknown_factory_kind_is_refused_by_the_fold() {
        let line = b"{\"at\":\"2026-01-01T00:00:00.000Z\",\"kind\":\"factory.x.y\",\"prev\":\"p\",\"seq\":1}\n";
        assert!(matches!(
            fold_bytes(line).unwrap_err(),
            BusError::BadEvent { .. }
        ));
        let other = b"{\"kind\":\"ledger.torn_tail_recovered\",\"seq\":1}\n";
        assert_eq!(fold_bytes(other).unwrap().events, 1);
    }
}
