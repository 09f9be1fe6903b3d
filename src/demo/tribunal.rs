//! Sample tribunal rounds and their record writer, shared by the faces' tests (the API, the
//! CLI, the cockpit's snapshots): a round of eight seats with one of each state, written in
//! the store's layout (`data/tribunal/rnd-NNNN.json`, its folder claimed with the stamp and
//! holding `envelope.txt`), every file 0600 and every folder 0700. A round made by
//! [`sample_round`] says in its causes that no juror was asked. `proctor demo`'s own round is
//! not one of these: it is convened for real on the demo server's fake fleet (`demo.rs`).

use std::path::{Path, PathBuf};

use crate::auth::{Actor, Principal};
use crate::evidence::store::DigestRef;
use crate::files::{self, FilesError};
use crate::home::Home;
use crate::tribunal::model::*;

fn sha256_hex(b: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(b))
}

/// What the sample round is about.
#[derive(Debug, Clone)]
pub struct Spec {
    /// `rnd-0001`.
    pub id: String,
    pub number: u32,
    pub candidate: String,
    pub run: String,
    pub identity: DigestRef,
    /// True: three seats are still pending (one on a slow juror, one on a silent one).
    pub in_progress: bool,
    /// New findings of this run's earlier rounds, oldest first.
    pub earlier: Vec<u32>,
}

/// The round's folder: `data/tribunal/<id>/`.
pub fn out_dir(home: &Home, id: &str) -> PathBuf {
    home.data.join("tribunal").join(id)
}

/// The envelope's text of the sample round.
pub const ENVELOPE_TEXT: &str = "== review contract ==\n\
intent: an escaped quote no longer ends a string\n\
criteria: lex_string skips the character after a backslash; a test covers it\n\
== file src/lexer.txt (changed) ==\n\
lex_string: skip the character after a backslash, then stop at the closing quote\n";

fn rung(
    backend: Backend,
    model: &str,
    family: &str,
    local: bool,
) -> (Backend, String, String, bool) {
    (backend, model.to_string(), family.to_string(), local)
}

fn attempt(
    id: &str,
    lens: &str,
    i: usize,
    r: &(Backend, String, String, bool),
    outcome: AttemptOutcome,
    reason: &str,
) -> Attempt {
    let sent = !matches!(
        outcome,
        AttemptOutcome::BuilderFamily
            | AttemptOutcome::SameFamilyAsPrimary
            | AttemptOutcome::Capacity
    );
    Attempt {
        rung: i,
        ladder: "primary".into(),
        backend: r.0,
        model: r.1.clone(),
        family: r.2.clone(),
        outcome,
        reason: reason.to_string(),
        run_id: sent.then(|| format!("{id}/{lens}/{i}")),
        raw_tail: None,
        duration_ms: if sent { 1200 + 300 * i as u64 } else { 0 },
    }
}

fn sat(r: &(Backend, String, String, bool), i: usize, ladder: &str) -> SatOn {
    SatOn {
        ladder: ladder.into(),
        rung: i,
        backend: r.0,
        model: r.1.clone(),
        family: r.2.clone(),
        local: r.3,
    }
}

fn judged(
    lens: &str,
    word: Word,
    findings: Vec<Finding>,
    counted: Word,
    notes: Vec<String>,
) -> Judged {
    let bare = word == Word::Pass && findings.is_empty();
    Judged::Verdict {
        verdict: Verdict {
            verdict: word,
            lens: lens.into(),
            findings,
        },
        counted,
        notes,
        bare,
    }
}

fn finding(severity: Severity, claim: &str, evidence: &str) -> Finding {
    Finding {
        severity,
        claim: claim.into(),
        evidence: evidence.into(),
    }
}

/// A round of eight seats, one of each state a person meets: passes, a refusal with
/// findings, a pass listing a blocker (counted as refuse), a hold for a dead juror, an
/// UNVERIFIED local verdict, a rejected rung (wrong lens); in progress, three pending. The
/// builder (`claude-opus-4`, anthropic) and the run's tool (codex, openai) are excluded:
/// their rungs are refused before any send in the routing.
pub fn sample_round(home: &Home, spec: &Spec) -> Round {
    let id = spec.id.as_str();
    let builder_rung = rung(Backend::Claude, "claude-opus-4", "anthropic", false);
    let openai_rung = rung(Backend::Codex, "gpt-5-codex", "openai", false);
    let refused = |lens: &str, out: &mut Vec<Attempt>| {
        out.push(attempt(
            id,
            lens,
            0,
            &builder_rung,
            AttemptOutcome::BuilderFamily,
            "family anthropic is the builder's (claude-opus-4): refused before any send",
        ));
        out.push(attempt(
            id,
            lens,
            1,
            &openai_rung,
            AttemptOutcome::BuilderFamily,
            "family openai made the candidate's run (codex): refused before any send",
        ));
    };
    let checked = || {
        vec![finding(
            Severity::Info,
            "read every file of the envelope against the criteria",
            "the criteria's cases each have a test in the envelope",
        )]
    };
    let mut seats = Vec::new();
    let lenses: [(&str, Tier, &str); 8] = [
        (
            "defect",
            Tier::DeepState,
            "find defects: wrong results, crashes, lost data",
        ),
        (
            "contract",
            Tier::DeepState,
            "check the change against its stated intent and criteria",
        ),
        (
            "state",
            Tier::DeepState,
            "follow every state and transition the change touches",
        ),
        (
            "concurrency",
            Tier::FastStructural,
            "find races, deadlocks and ordering faults",
        ),
        (
            "security",
            Tier::OperatorSecurity,
            "find what an attacker could do with this change",
        ),
        (
            "tests",
            Tier::FastStructural,
            "check that the tests assert the effects the criteria name",
        ),
        (
            "operator-safety",
            Tier::OperatorSecurity,
            "find what could surprise or harm the operator",
        ),
        (
            "generalist",
            Tier::Generalist,
            "read it as a careful senior reviewer would",
        ),
    ];
    for (lens, tier, charter) in lenses {
        let mut routing = Vec::new();
        refused(lens, &mut routing);
        let mut seat = Seat {
            lens: lens.into(),
            tier,
            charter: charter.into(),
            state: SeatState::Pending,
            sat: None,
            routing: Vec::new(),
            judged: None,
            verification: None,
            findings: Counts::default(),
            new_findings: 0,
            verdict_file: None,
            cause: None,
        };
        let done = |seat: &mut Seat| {
            seat.verdict_file = Some(format!("verdict-{}.json", seat.lens));
        };
        match lens {
            "defect" | "generalist" => {
                let r = rung(Backend::Gemini, "fake-pass", "google", false);
                routing.push(attempt(
                    id,
                    lens,
                    2,
                    &r,
                    AttemptOutcome::Sat,
                    "answered a verdict for this lens",
                ));
                seat.sat = Some(sat(&r, 2, "primary"));
                let f = checked();
                seat.findings = Counts::of(&f);
                seat.judged = Some(judged(lens, Word::Pass, f, Word::Pass, vec![]));
                seat.state = SeatState::Pass;
                done(&mut seat);
            }
            "contract" => {
                let r = rung(Backend::Openai, "fake-refuse", "xai", false);
                routing.push(attempt(
                    id,
                    lens,
                    2,
                    &r,
                    AttemptOutcome::Sat,
                    "answered a verdict for this lens",
                ));
                seat.sat = Some(sat(&r, 2, "primary"));
                let f = vec![
                    finding(
                        Severity::Major,
                        "an error path returns success",
                        "the envelope's first changed file returns Ok after a failed write",
                    ),
                    finding(
                        Severity::Minor,
                        "a message does not name the remedy",
                        "the error text in the first changed file",
                    ),
                ];
                seat.findings = Counts::of(&f);
                seat.new_findings = 2;
                seat.judged = Some(judged(lens, Word::Refuse, f, Word::Refuse, vec![]));
                seat.state = SeatState::Refuse;
                seat.cause = Some("refused: 1 major, 1 minor".into());
                done(&mut seat);
            }
            "security" => {
                let r = rung(Backend::Openai, "fake-blocker", "mistral", false);
                routing.push(attempt(
                    id,
                    lens,
                    2,
                    &r,
                    AttemptOutcome::Sat,
                    "answered a verdict for this lens",
                ));
                seat.sat = Some(sat(&r, 2, "primary"));
                let f = vec![finding(
                    Severity::Blocker,
                    "the new test does not assert the effect",
                    "the test file's only assertion is on a constant",
                )];
                seat.findings = Counts::of(&f);
                seat.new_findings = 1;
                seat.judged = Some(judged(
                    lens,
                    Word::Pass,
                    f,
                    Word::Refuse,
                    vec!["a pass that lists a blocker finding is a refuse".into()],
                ));
                seat.state = SeatState::Refuse;
                seat.cause = Some("a pass listing a blocker counts as refuse".into());
                done(&mut seat);
            }
            "operator-safety" => {
                for i in 2..5 {
                    let r = rung(
                        Backend::Openai,
                        &format!("fake-wrong-lens@{i}"),
                        ["xai", "mistral", "deepseek"][i - 2],
                        false,
                    );
                    let mut a = attempt(
                        id,
                        lens,
                        i,
                        &r,
                        AttemptOutcome::WrongLens,
                        "answered for lens generalist, not operator-safety",
                    );
                    a.raw_tail = Some(
                        "{\"verdict\": \"pass\", \"lens\": \"generalist\", \"findings\": []}"
                            .into(),
                    );
                    routing.push(a);
                }
                seat.state = SeatState::Rejected;
                seat.cause =
                    Some("every rung that answered answered for another lens: held".into());
            }
            "tests" => {
                let r = rung(Backend::Ollama, "fake-pass@local", "meta", true);
                routing.push(attempt(
                    id,
                    lens,
                    2,
                    &r,
                    AttemptOutcome::Sat,
                    "answered a verdict for this lens (local)",
                ));
                let f = checked();
                seat.findings = Counts::of(&f);
                seat.sat = Some(sat(&r, 2, "primary"));
                seat.judged = Some(judged(lens, Word::Pass, f, Word::Pass, vec![]));
                let v = rung(Backend::Openai, "fake-silent", "deepseek", false);
                let mut a = attempt(
                    id,
                    lens,
                    0,
                    &v,
                    AttemptOutcome::NoAnswer,
                    "no answer before the deadline (30 s)",
                );
                a.ladder = "verifier".into();
                routing.push(a);
                seat.verification = Some(Verification {
                    state: "none".into(),
                    sat: None,
                    judged: None,
                });
                seat.state = SeatState::Unverified;
                seat.cause = Some("passed on a local model; no verifier of another family answered: UNVERIFIED, a hold".into());
                done(&mut seat);
            }
            "concurrency" if !spec.in_progress => {
                let r = rung(Backend::Openai, "fake-dead", "alibaba", false);
                let mut a = attempt(
                    id,
                    lens,
                    2,
                    &r,
                    AttemptOutcome::Dead,
                    "connection refused (127.0.0.1)",
                );
                a.run_id = None;
                routing.push(a);
                let l = rung(Backend::Ollama, "fake-ctx-512", "meta", true);
                routing.push(attempt(
                    id,
                    lens,
                    3,
                    &l,
                    AttemptOutcome::Capacity,
                    "the prompt needs 2130 tokens; the model holds 512: refused before sending",
                ));
                seat.state = SeatState::Hold;
                seat.cause =
                    Some("no juror answered: every rung refused, dead or out of capacity".into());
            }
            _ => {
                // Pending: concurrency (in progress) and state, sitting on a slow and a silent juror.
                let model = if lens == "state" {
                    "fake-slow-900000"
                } else {
                    "fake-silent"
                };
                let mut a = attempt(
                    id,
                    lens,
                    2,
                    &rung(Backend::Openai, model, "google", false),
                    AttemptOutcome::Sat,
                    "asked; no answer yet",
                );
                a.outcome = AttemptOutcome::NoAnswer;
                if spec.in_progress {
                    // Asked, not answered yet: no line in the routing until it decides.
                    seat.cause = Some(format!(
                        "asking {model} (google); waiting for its answer (timeout 900 s)"
                    ));
                } else {
                    a.reason = "no answer before the deadline (900 s)".into();
                    seat.state = SeatState::Hold;
                    seat.cause = Some("the juror never answered: held".into());
                    routing.push(a);
                }
            }
        }
        seat.routing = routing;
        seats.push(seat);
    }
    let mut findings = Counts::default();
    for s in &seats {
        findings.add(s.findings);
    }
    let new_findings: u32 = seats.iter().map(|s| s.new_findings).sum();
    let mut trend = spec.earlier.clone();
    trend.push(new_findings);
    let out = out_dir(home, id);
    let text = ENVELOPE_TEXT;
    Round {
        format: ROUND_FORMAT.into(),
        id: id.into(),
        candidate: spec.candidate.clone(),
        run_ref: spec.run.clone(),
        number: spec.number,
        identity: spec.identity.clone(),
        envelope: EnvelopeRef {
            recipe: ENVELOPE_RECIPE.into(),
            digest: sha256_hex(text.as_bytes()),
            bytes: text.len() as u64,
            tokens: (text.len() as u64).div_ceil(3),
            files: vec![EnvelopeFile {
                path: "src/lexer.txt".into(),
                role: "changed".into(),
                bytes: 81,
                sha256: "0".repeat(64),
            }],
            file: "envelope.txt".into(),
        },
        builder: "claude-opus-4".into(),
        builder_family: "anthropic".into(),
        excluded_families: vec!["anthropic".into(), "openai".into()],
        mode: Mode::CrossFamily,
        mode_note: "graded cross-family".into(),
        intent: "an escaped quote no longer ends a string".into(),
        criteria_sha256: sha256_hex(b"lex_string skips the character after a backslash"),
        state: if spec.in_progress {
            RoundState::InProgress
        } else {
            RoundState::Refused
        },
        started_at: "2026-12-01T21:00:00.000Z".into(),
        ended_at: (!spec.in_progress).then(|| "2026-12-01T21:04:00.000Z".into()),
        by: Actor {
            token_id: "tok-0001".into(),
            name: "owner".into(),
            principal: Principal::Person,
        },
        out_dir: out.to_string_lossy().into_owned(),
        seats,
        engine: None,
        findings,
        new_findings,
        convergence: (!spec.in_progress).then(|| Convergence {
            state: "converging".into(),
            trend,
            cause: "new findings fell: fix them and convene again".into(),
        }),
        causes: vec!["the demo's round: written by `proctor demo`, no juror was asked".into()],
    }
}

/// Writes `round` as the contract lays it out: `data/tribunal/<id>.json` (replaced
/// atomically), its folder claimed with the stamp, and the envelope's text in it.
pub fn write_round(home: &Home, round: &Round, envelope: &str) -> Result<(), FilesError> {
    let dir = home.data.join("tribunal");
    files::ensure_private_dir(&dir)?;
    let out = Path::new(&round.out_dir);
    files::ensure_private_dir(out)?;
    let stamp = serde_json::json!({"format": STAMP_FORMAT, "round": round.id});
    files::write_atomic(&out.join(STAMP_FILE), stamp.to_string().as_bytes())?;
    files::write_atomic(&out.join(&round.envelope.file), envelope.as_bytes())?;
    let bytes = serde_json::to_vec_pretty(round).expect("a round serialises");
    files::write_atomic(&dir.join(format!("{}.json", round.id)), &bytes)
}
