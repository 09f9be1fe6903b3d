//! The coordination tracer (`proctor factory smoke`, seed 000 "Le traceur de
//! coordination"): a coordinator, a builder and a reviewer exchange three correlated
//! messages and one handoff that transfers no authority on a fresh [`Bus`], each
//! acknowledged by its recipient; they heartbeat and read their inboxes. No model runs and
//! no code of the artifact executes: the artifact is only hashed.
//!
//! Five richness checks block ([`richness`], a pure function of the folded log and of what
//! `ledger::verify` said): a failing one makes the run fail. The report carries the log's
//! fixed point, so anyone can recompute it (`proctor ledger verify FILE`).

use std::collections::BTreeMap;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use serde::Serialize;
use sha2::{Digest, Sha256};

use super::bus::{self, ACK_MEANING, Bus, BusError, Folded, Role, TOOL_SURFACE};
use crate::files;
use crate::ledger::{self, FixedPoint, LedgerError};

/// The report's `command`.
pub const COMMAND: &str = "factory-smoke";
/// The report's `execution`: what the run is not.
pub const EXECUTION: &str = "coordination-tracer; no code execution";
/// Where the log sits, relative to the data dir (the report names no absolute log path).
pub const PATH_ROLE: &str = "data-dir/events.jsonl";
/// The one correlation id of the exchange.
pub const CORRELATION: &str = "cor-0001";
/// What the report does not show.
pub const DOES_NOT_PROVE: [&str; 3] = [
    "no model ran and no code was executed: the artifact was only hashed",
    "nothing about the quality or provenance of any change, human or AI",
    "an acknowledgement is receipt only; no message is an approval or a verdict",
];

/// The five checks, in the order they are reported.
pub const CHECKS: [&str; 5] = [
    "several-parties",
    "acked-by-another-actor",
    "correlation-consistent",
    "handoff-without-authority",
    "log-verifies",
];

/// What can stop the tracer before it has a report.
#[derive(Debug, thiserror::Error)]
pub enum SmokeError {
    #[error(
        "cannot read the artifact {path}: {err}. Remedy: give --artifact an existing, \
         readable regular file (it is hashed, never run)"
    )]
    Artifact { path: PathBuf, err: io::Error },
    #[error(transparent)]
    Bus(#[from] BusError),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
}

/// One richness check's result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    pub name: &'static str,
    pub ok: bool,
    pub detail: String,
}

/// The artifact, as hashed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Artifact {
    pub path: String,
    pub bytes: u64,
    pub sha256: String,
}

/// What the log's verification said, beside the fixed point of its exact bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LogEvidence {
    /// `ledger::verify`'s fixed point, or why it failed.
    pub verified: Result<FixedPoint, String>,
    /// The fixed point of the exact file bytes, hashed independently of the verification.
    pub file: FixedPoint,
}

impl LogEvidence {
    /// Verifies the log at `path` and hashes its exact bytes.
    pub fn of(path: &Path) -> Result<LogEvidence, LedgerError> {
        let verified = match ledger::verify(path) {
            Ok(v) => Ok(v.fixed_point),
            Err(ledger::VerifyError::Bad { fault, .. }) => Err(fault.to_string()),
            Err(ledger::VerifyError::Read(e)) => return Err(e),
        };
        Ok(LogEvidence {
            verified,
            file: ledger::fixed_point(path)?,
        })
    }
}

fn check(name: &'static str, problems: Vec<String>, fine: String) -> Check {
    Check {
        name,
        ok: problems.is_empty(),
        detail: if problems.is_empty() {
            fine
        } else {
            problems.join("; ")
        },
    }
}

/// The five blocking richness checks, over the folded log and its verification.
pub fn richness(f: &Folded, log: &LogEvidence) -> [Check; 5] {
    // 1. Several parties really involved.
    let mut p: Vec<String> = Vec::new();
    for role in [Role::Coordinator, Role::Builder, Role::Reviewer] {
        if !f.actors.iter().any(|a| a.role == role) {
            p.push(format!("no {} registered", role.as_str()));
        }
    }
    for a in &f.actors {
        let took_part =
            f.messages.iter().any(|m| m.from == a.id) || f.acks.iter().any(|k| k.acked_by == a.id);
        if !took_part {
            p.push(format!("{} neither sent nor acknowledged a message", a.id));
        }
    }
    let mut senders: Vec<&str> = f.messages.iter().map(|m| m.from.as_str()).collect();
    senders.sort_unstable();
    senders.dedup();
    if senders.len() < 2 {
        p.push(format!(
            "messages come from {} sender(s), not several",
            senders.len()
        ));
    }
    let parties = check(
        CHECKS[0],
        p,
        format!(
            "{} actors, {} senders, each sent or acknowledged",
            f.actors.len(),
            senders.len()
        ),
    );

    // 2. Every message acknowledged by an actor other than its sender.
    let mut p: Vec<String> = Vec::new();
    if f.messages.is_empty() {
        p.push("no message".into());
    }
    for m in &f.messages {
        let acks: Vec<_> = f.acks.iter().filter(|k| k.message_id == m.id).collect();
        if acks.iter().any(|k| k.acked_by == m.from) {
            p.push(format!(
                "{} is acknowledged by its own sender {}",
                m.id, m.from
            ));
        }
        if !acks
            .iter()
            .any(|k| k.acked_by != m.from && f.actor(&k.acked_by).is_some())
        {
            p.push(format!(
                "{} has no acknowledgement by a registered actor other than its sender",
                m.id
            ));
        }
    }
    for k in &f.acks {
        if k.meaning != ACK_MEANING {
            p.push(format!(
                "the acknowledgement of {} by {} claims another meaning",
                k.message_id, k.acked_by
            ));
        }
    }
    let acked = check(
        CHECKS[1],
        p,
        format!(
            "{} messages, {} acknowledgements, none by a sender",
            f.messages.len(),
            f.acks.len()
        ),
    );

    // 3. Correlation ids consistent.
    let mut p: Vec<String> = Vec::new();
    let first = f.messages.first().map(|m| m.correlation_id.as_str());
    if let Some(c) = first
        && !files::valid_id(c, "cor-")
    {
        p.push(format!("{c:?} is not a correlation id"));
    }
    for m in &f.messages {
        if Some(m.correlation_id.as_str()) != first {
            p.push(format!(
                "{} carries {:?}, the exchange {:?}",
                m.id,
                m.correlation_id,
                first.unwrap_or("")
            ));
        }
        for who in [&m.from, &m.to] {
            if f.actor(who).is_none() {
                p.push(format!("{} names {who}, who is not registered", m.id));
            }
        }
    }
    for k in &f.acks {
        if f.message(&k.message_id).is_none() {
            p.push(format!(
                "an acknowledgement names {}, no message",
                k.message_id
            ));
        }
    }
    for r in &f.inbox_reads {
        for id in &r.messages {
            if f.message(id).map(|m| &m.to) != Some(&r.actor) {
                p.push(format!(
                    "{}'s inbox read names {id}, not sent to it",
                    r.actor
                ));
            }
        }
    }
    let correlated = check(
        CHECKS[2],
        p,
        format!(
            "every message carries {}; every reference resolves",
            first.unwrap_or("?")
        ),
    );

    // 4. A handoff present, transferring no authority.
    let mut p: Vec<String> = Vec::new();
    let handoffs: Vec<_> = f.messages.iter().filter(|m| m.is_handoff()).collect();
    if handoffs.is_empty() {
        p.push("no handoff".into());
    }
    for h in &handoffs {
        if let Some(a) = &h.authority_transferred
            && !a.is_empty()
        {
            p.push(format!("{} transfers authority {a:?}", h.id));
        }
    }
    let handoff = check(
        CHECKS[3],
        p,
        format!("{} handoff(s), authorityTransferred []", handoffs.len()),
    );

    // 5. The log verifies, and its fixed point is that of the exact bytes folded.
    let mut p: Vec<String> = Vec::new();
    match &log.verified {
        Err(why) => p.push(format!("ledger verify fails: {why}")),
        Ok(fp) => {
            if fp != &log.file {
                p.push(format!(
                    "the verified fixed point ({} bytes, {}) is not the file's ({} bytes, {})",
                    fp.bytes, fp.sha256, log.file.bytes, log.file.sha256
                ));
            }
            if fp.events != f.events {
                p.push(format!(
                    "{} events verified, {} folded",
                    fp.events, f.events
                ));
            }
        }
    }
    let verifies = check(
        CHECKS[4],
        p,
        format!(
            "ledger verify: {} events, {} bytes, sha256 {}",
            log.file.events, log.file.bytes, log.file.sha256
        ),
    );

    [parties, acked, correlated, handoff, verifies]
}

/// `acknowledgements[]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AckOut {
    pub message_id: String,
    pub acked_by: String,
    pub meaning: String,
}

/// `handoff`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HandoffOut {
    pub message_id: String,
    pub correlation_id: String,
    pub authority_transferred: Vec<String>,
}

/// `evidenceLog`: the log's fixed point.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EvidenceLog {
    pub format: String,
    pub path_role: &'static str,
    pub bytes: u64,
    pub events: u64,
    pub sha256: String,
}

/// `verification`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Verification {
    /// Both below.
    pub ok: bool,
    /// The log verified and its fixed point is the file's (check `log-verifies`).
    pub evidence_ok: bool,
    /// Every one of the five blocking checks passed.
    pub evidence_gates_result: bool,
}

/// The tracer's report (seed 000's fields, camelCase), plus the checks themselves.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub ok: bool,
    /// `completed`, or `failed` when a check failed.
    pub status: &'static str,
    pub command: &'static str,
    pub execution: &'static str,
    pub artifact: Artifact,
    pub task: String,
    /// Role → actor id.
    pub actors: BTreeMap<&'static str, String>,
    /// The messages that are not the handoff.
    pub messages: Vec<String>,
    pub acknowledgements: Vec<AckOut>,
    pub handoff: Option<HandoffOut>,
    pub evidence_log: EvidenceLog,
    pub verification: Verification,
    pub checks: Vec<Check>,
    /// The names of the checks that failed (empty when ok).
    pub failed_checks: Vec<&'static str>,
    pub tool_surface: Vec<&'static str>,
    pub does_not_prove: Vec<&'static str>,
}

/// Builds the report from the folded log, its evidence and the checks.
pub fn report(artifact: Artifact, task: &str, f: &Folded, log: &LogEvidence) -> Report {
    let checks = richness(f, log);
    let failed: Vec<&'static str> = checks.iter().filter(|c| !c.ok).map(|c| c.name).collect();
    let evidence_ok = checks[4].ok;
    let gates = failed.is_empty();
    let mut actors = BTreeMap::new();
    for a in &f.actors {
        actors
            .entry(a.role.as_str())
            .or_insert_with(|| a.id.clone());
    }
    let handoff = f
        .messages
        .iter()
        .find(|m| m.is_handoff())
        .map(|m| HandoffOut {
            message_id: m.id.clone(),
            correlation_id: m.correlation_id.clone(),
            authority_transferred: m.authority_transferred.clone().unwrap_or_default(),
        });
    let ok = evidence_ok && gates;
    Report {
        ok,
        status: if ok { "completed" } else { "failed" },
        command: COMMAND,
        execution: EXECUTION,
        artifact,
        task: task.to_string(),
        actors,
        messages: f
            .messages
            .iter()
            .filter(|m| !m.is_handoff())
            .map(|m| m.id.clone())
            .collect(),
        acknowledgements: f
            .acks
            .iter()
            .map(|k| AckOut {
                message_id: k.message_id.clone(),
                acked_by: k.acked_by.clone(),
                meaning: k.meaning.clone(),
            })
            .collect(),
        handoff,
        evidence_log: EvidenceLog {
            format: log.file.format.clone(),
            path_role: PATH_ROLE,
            bytes: log.file.bytes,
            events: log.file.events,
            sha256: log.file.sha256.clone(),
        },
        verification: Verification {
            ok,
            evidence_ok,
            evidence_gates_result: gates,
        },
        checks: checks.to_vec(),
        failed_checks: failed,
        tool_surface: TOOL_SURFACE.to_vec(),
        does_not_prove: DOES_NOT_PROVE.to_vec(),
    }
}

/// Hashes the artifact (streamed; never executed). The path is reported made absolute.
pub fn hash_artifact(path: &Path) -> Result<Artifact, SmokeError> {
    let err = |err| SmokeError::Artifact {
        path: path.to_path_buf(),
        err,
    };
    let abs = std::path::absolute(path).map_err(err)?;
    let mut file = std::fs::File::open(path).map_err(err)?;
    if !file.metadata().map_err(err)?.is_file() {
        return Err(err(io::Error::other("not a regular file")));
    }
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 16];
    let mut bytes = 0u64;
    loop {
        let n = file.read(&mut buf).map_err(err)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
        bytes += n as u64;
    }
    Ok(Artifact {
        path: abs.to_string_lossy().into_owned(),
        bytes,
        sha256: hex::encode(h.finalize()),
    })
}

/// Runs the tracer on a fresh bus in `data_dir` and returns its report (whose `ok` says
/// whether the five checks passed). The log is closed before it is verified and hashed,
/// so the fixed point is that of the final file.
pub fn run(artifact: &Path, task: &str, data_dir: &Path) -> Result<Report, SmokeError> {
    run_hashed(hash_artifact(artifact)?, task, data_dir)
}

/// [`run`] with the artifact already hashed ([`hash_artifact`]).
pub fn run_hashed(art: Artifact, task: &str, data_dir: &Path) -> Result<Report, SmokeError> {
    let mut b = Bus::create(data_dir)?;
    let c = b.register(Role::Coordinator)?;
    let w = b.register(Role::Builder)?;
    let r = b.register(Role::Reviewer)?;
    for a in [&c, &w, &r] {
        b.heartbeat(a)?;
    }
    let m1 = b.send(
        &c,
        &w,
        CORRELATION,
        &format!(
            "task: {task}\nartifact: {} bytes, sha256 {}",
            art.bytes, art.sha256
        ),
    )?;
    b.inbox(&w)?;
    b.ack(&m1, &w)?;
    let m2 = b.send(
        &w,
        &c,
        CORRELATION,
        &format!(
            "the candidate is the artifact sha256 {}, as given: nothing was built or run",
            art.sha256
        ),
    )?;
    b.inbox(&c)?;
    b.ack(&m2, &c)?;
    let h = b.handoff(
        &w,
        &r,
        CORRELATION,
        &format!(
            "review the artifact sha256 {}; this handoff transfers no authority",
            art.sha256
        ),
        &[],
    )?;
    b.inbox(&r)?;
    b.ack(&h, &r)?;
    let m4 = b.send(
        &r,
        &c,
        CORRELATION,
        "handoff received; a tracer gives no verdict",
    )?;
    b.inbox(&c)?;
    b.ack(&m4, &c)?;
    let path = b.close();
    let log = LogEvidence::of(&path)?;
    let folded = bus::fold_file(&path)?;
    Ok(report(art, task, &folded, &log))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::factory::bus::{Ack, Message};

    struct Ran {
        _t: tempfile::TempDir,
        log: PathBuf,
        report: Report,
    }

    fn ran() -> Ran {
        let t = tempfile::tempdir().unwrap();
        let art = t.path().join("a.txt");
        std::fs::write(&art, b"abc").unwrap();
        let data = t.path().join("data");
        let report = run(&art, "Review this candidate", &data).unwrap();
        Ran {
            log: data.join(bus::EVENTS_FILE),
            _t: t,
            report,
        }
    }

    fn inputs(r: &Ran) -> (Folded, LogEvidence) {
        (
            bus::fold_file(&r.log).unwrap(),
            LogEvidence::of(&r.log).unwrap(),
        )
    }

    fn failed(f: &Folded, log: &LogEvidence) -> Vec<&'static str> {
        let a = Artifact {
            path: "x".into(),
            bytes: 0,
            sha256: String::new(),
        };
        let r = report(a, "t", f, log);
        assert!(!r.ok);
        assert_eq!(r.status, "failed");
        assert!(!r.verification.evidence_gates_result);
        r.failed_checks
    }

    #[test]
    fn the_tracer_passes_with_the_seeds_shape() {
        let r = ran();
        let rep = &r.report;
        assert!(rep.ok, "{:#?}", rep.checks);
        assert_eq!(rep.status, "completed");
        assert_eq!(rep.execution, EXECUTION);
        assert_eq!(
            rep.artifact.sha256,
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(rep.actors["coordinator"], "act-0001");
        assert_eq!(rep.actors["builder"], "act-0002");
        assert_eq!(rep.actors["reviewer"], "act-0003");
        assert_eq!(rep.messages, ["msg-0001", "msg-0002", "msg-0004"]);
        let h = rep.handoff.as_ref().unwrap();
        assert_eq!(h.message_id, "msg-0003");
        assert_eq!(h.correlation_id, CORRELATION);
        assert!(h.authority_transferred.is_empty());
        assert_eq!(rep.acknowledgements.len(), 4);
        assert!(
            rep.acknowledgements
                .iter()
                .all(|a| a.meaning == ACK_MEANING)
        );
        let fp = ledger::verify(&r.log).unwrap().fixed_point;
        assert_eq!(rep.evidence_log.sha256, fp.sha256);
        assert_eq!(rep.evidence_log.bytes, fp.bytes);
        assert_eq!(rep.evidence_log.events, 18);
        assert_eq!(rep.evidence_log.format, ledger::FIXED_POINT_FORMAT);
        assert_eq!(rep.tool_surface, TOOL_SURFACE);
        assert!(rep.failed_checks.is_empty());
        let v = serde_json::to_value(rep).unwrap();
        for k in [
            "evidenceLog",
            "toolSurface",
            "acknowledgements",
            "verification",
        ] {
            assert!(v.get(k).is_some(), "{k}");
        }
        assert_eq!(v["evidenceLog"]["pathRole"], PATH_ROLE);
        assert_eq!(v["verification"]["evidenceGatesResult"], true);
    }

    #[test]
    fn an_ack_by_its_own_sender_fails_the_run() {
        let r = ran();
        let (mut f, log) = inputs(&r);
        let m = f.messages[0].clone();
        f.acks.retain(|a| a.message_id != m.id);
        f.acks.push(Ack {
            message_id: m.id.clone(),
            acked_by: m.from.clone(),
            meaning: ACK_MEANING.into(),
            seq: 99,
        });
        assert_eq!(failed(&f, &log), ["acked-by-another-actor"]);
    }

    #[test]
    fn an_unacknowledged_message_or_another_meaning_fails() {
        let r = ran();
        let (mut f, log) = inputs(&r);
        f.acks.remove(0);
        assert_eq!(failed(&f, &log), ["acked-by-another-actor"]);
        let (mut f, log) = inputs(&r);
        f.acks[0].meaning = "approved".into();
        assert_eq!(failed(&f, &log), ["acked-by-another-actor"]);
    }

    #[test]
    fn one_party_alone_fails() {
        let r = ran();
        let (mut f, log) = inputs(&r);
        let c = f.actors[0].id.clone();
        for m in &mut f.messages {
            m.from = c.clone();
        }
        f.acks.retain(|a| a.acked_by != c);
        let fails = failed(&f, &log);
        assert!(fails.contains(&"several-parties"), "{fails:?}");
        let (mut f, log) = inputs(&r);
        f.actors.retain(|a| a.role != Role::Reviewer);
        assert!(failed(&f, &log).contains(&"several-parties"));
    }

    #[test]
    fn an_inconsistent_correlation_fails() {
        let r = ran();
        let (mut f, log) = inputs(&r);
        f.messages[2].correlation_id = "cor-0002".into();
        assert_eq!(failed(&f, &log), ["correlation-consistent"]);
        let (mut f, log) = inputs(&r);
        f.acks[1].message_id = "msg-0042".into();
        assert!(failed(&f, &log).contains(&"correlation-consistent"));
    }

    #[test]
    fn no_handoff_or_a_handoff_with_authority_fails() {
        let r = ran();
        let (mut f, log) = inputs(&r);
        for m in &mut f.messages {
            m.authority_transferred = None;
        }
        assert_eq!(failed(&f, &log), ["handoff-without-authority"]);
        let (mut f, log) = inputs(&r);
        let h: &mut Message = f.messages.iter_mut().find(|m| m.is_handoff()).unwrap();
        h.authority_transferred = Some(vec!["publish".into()]);
        assert_eq!(failed(&f, &log), ["handoff-without-authority"]);
    }

    #[test]
    fn a_tampered_log_fails_log_verifies() {
        let r = ran();
        let mut bytes = std::fs::read(&r.log).unwrap();
        let i = bytes.windows(7).position(|w| w == b"act-000").unwrap();
        bytes[i + 6] = b'7';
        std::fs::write(&r.log, &bytes).unwrap();
        let log = LogEvidence::of(&r.log).unwrap();
        assert!(log.verified.is_err());
        let f = bus::fold_bytes(&bytes).unwrap();
        assert!(failed(&f, &log).contains(&"log-verifies"));
    }

    #[test]
    fn a_fixed_point_that_is_not_the_files_fails() {
        let r = ran();
        let (f, mut log) = inputs(&r);
        log.file.sha256 = "0".repeat(64);
        assert_eq!(failed(&f, &log), ["log-verifies"]);
        let (mut f, log) = inputs(&r);
        f.events += 1;
        assert_eq!(failed(&f, &log), ["log-verifies"]);
    }

    #[test]
    fn a_missing_artifact_is_an_error_naming_the_remedy() {
        let t = tempfile::tempdir().unwrap();
        let e = run(&t.path().join("none"), "t", &t.path().join("d")).unwrap_err();
        assert!(e.to_string().contains("Remedy"), "{e}");
        assert!(
            !t.path().join("d").exists(),
            "no log before the artifact is read"
        );
        let e = run(t.path(), "t", &t.path().join("d")).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
    }
}
