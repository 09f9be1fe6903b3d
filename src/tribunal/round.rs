//! A round: seating every lens on its tier's ladder, reading each answer strictly, and
//! recording the round as its seats decide.
//!
//! In order, nothing sent before the refusals that can be made without sending:
//! 1. the candidate must still hold its bytes (a verdict on stale bytes is not a verdict),
//!    the registry must parse, the builder must be named to a family;
//! 2. the envelope is built from the current files (a leak fails the round before anything
//!    is written);
//! 3. the output folder is claimed with a stamp (a folder holding files of a round's shapes
//!    without the stamp is refused, the files and the remedy named, nothing deleted);
//! 4. the engine runs its own checks (new tests, regression, anti-false-green, red-first);
//!    a harness that cannot judge makes the round invalid and no juror is asked;
//! 5. every lens is seated at once, each on its own ladder: each rung of an excluded family
//!    (the builder's, the run's tool's) is refused aloud before any send; a prompt that does
//!    not fit is refused before any send; a juror that never answered is a hold re-seated
//!    down the ladder; an answer for another lens is a rejected rung (its words kept); the
//!    first juror that answers sits, once (no retries). A fast-structural lens that passed on
//!    a local model is verified by the verifier's ladder (another family than the builder's
//!    and the seat's), or stays UNVERIFIED (a hold);
//! 6. each seat's verdict file and the round's record are written as soon as the seat
//!    decides, and before any error is raised: a lens that blows up never throws away paid
//!    verdicts.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use sha2::Digest as _;

use crate::auth::Actor;
use crate::evidence::candidate::{self, Currency, IDENTITY_RECIPE};
use crate::evidence::checks;
use crate::evidence::store::DigestRef;
use crate::files::{self, FilesError};
use crate::home::Home;
use crate::ledger::Ledger;
use crate::tribunal::config::{self, ConfigError};
use crate::tribunal::envelope::{self, Contract, Envelope, Forbidden};
use crate::tribunal::jurors::{self, Call, Reply};
use crate::tribunal::model::*;
use crate::tribunal::store::{self, StoreError};
use crate::tribunal::{engine, verdict};

/// The most bytes of an intent (one line).
pub const MAX_INTENT_BYTES: usize = 512;
/// The most bytes of the criteria text.
pub const MAX_CRITERIA_BYTES: usize = 64 * 1024;
/// Ledger kinds.
pub const STARTED_KIND: &str = "tribunal.round.started";
pub const SEAT_KIND: &str = "tribunal.seat.decided";
pub const RECORDED_KIND: &str = "tribunal.round.recorded";

/// The rounds in progress, one per candidate at most (held in the server's state).
#[derive(Debug, Default)]
pub struct Live {
    inner: Mutex<BTreeMap<String, String>>,
}

impl Live {
    /// The round in progress on `candidate`, if any.
    pub fn round_of(&self, candidate: &str) -> Option<String> {
        self.lock().get(candidate).cloned()
    }
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, String>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Removes a candidate's entry from [`Live`] when the round ends, however it ends.
struct LiveGuard<'a> {
    live: &'a Live,
    candidate: String,
}

impl Drop for LiveGuard<'_> {
    fn drop(&mut self) {
        self.live.lock().remove(&self.candidate);
    }
}

/// What a round needs from the server.
pub struct Ctx<'a> {
    pub home: &'a Home,
    pub ledger: &'a Ledger,
    pub env: jurors::Env,
    pub live: &'a Live,
}

/// `tribunal convene`.
#[derive(Debug, Clone)]
pub struct Convene {
    pub candidate: String,
    pub builder: String,
    pub intent: String,
    pub criteria: String,
    pub out: Option<PathBuf>,
    pub solo: bool,
}

#[derive(Debug, thiserror::Error)]
pub enum RoundError {
    #[error("no candidate {0}; `proctor candidate list` shows the bound ones")]
    UnknownCandidate(String),
    #[error(
        "stale: {0}; bind the run again (`proctor candidate bind --run RUN`) and convene on the new candidate"
    )]
    Stale(String),
    #[error(
        "a round is in progress on {candidate}: {round}; wait for it (`proctor tribunal show {round}`)"
    )]
    InProgress { candidate: String, round: String },
    #[error(
        "{round} already judged these exact bytes ({state}); a new round needs new bytes: fix, bind again, convene on the new candidate"
    )]
    AlreadyJudged { round: String, state: String },
    #[error("the envelope leaks the author, so it cannot be blind: {0}")]
    Leak(String),
    #[error("{0}")]
    Envelope(String),
    #[error(
        "the output folder {dir} holds files of a round's shapes without proctor's stamp ({STAMP_FILE}): {files}; nothing was deleted. Choose an empty folder, or move these files away yourself"
    )]
    OutDirRefused { dir: String, files: String },
    #[error("the output folder {0} cannot be used: {1}")]
    OutDir(String, String),
    #[error("{0}")]
    UnknownBuilder(String),
    #[error("{0}")]
    Config(String),
    #[error("{0}")]
    BadRequest(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error(transparent)]
    Files(#[from] FilesError),
    #[error("the ledger refused the round's event: {0}")]
    Ledger(String),
}

impl RoundError {
    pub fn code(&self) -> &'static str {
        match self {
            RoundError::UnknownCandidate(_) => "unknown_candidate",
            RoundError::Stale(_) => "stale",
            RoundError::InProgress { .. } => "in_progress",
            RoundError::AlreadyJudged { .. } => "already_judged",
            RoundError::Leak(_) => "leak",
            RoundError::Envelope(_) => "envelope_refused",
            RoundError::OutDirRefused { .. } | RoundError::OutDir(..) => "out_dir_refused",
            RoundError::UnknownBuilder(_) => "unknown_builder",
            RoundError::Config(_) => "config_invalid",
            RoundError::BadRequest(_) => "bad_request",
            RoundError::Store(_) | RoundError::Files(_) | RoundError::Ledger(_) => "internal",
        }
    }
    /// The HTTP status the API answers with.
    pub fn status(&self) -> u16 {
        match self {
            RoundError::UnknownCandidate(_) => 404,
            RoundError::Stale(_)
            | RoundError::InProgress { .. }
            | RoundError::AlreadyJudged { .. }
            | RoundError::Leak(_)
            | RoundError::Envelope(_)
            | RoundError::OutDirRefused { .. }
            | RoundError::OutDir(..) => 409,
            RoundError::UnknownBuilder(_) | RoundError::Config(_) | RoundError::BadRequest(_) => {
                422
            }
            RoundError::Store(_) | RoundError::Files(_) | RoundError::Ledger(_) => 500,
        }
    }
}

impl From<ConfigError> for RoundError {
    fn from(e: ConfigError) -> RoundError {
        if e.code() == "unknown_builder" {
            RoundError::UnknownBuilder(e.to_string())
        } else {
            RoundError::Config(e.to_string())
        }
    }
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(sha2::Sha256::digest(bytes))
}

/// The registry with each rung probed (when `probe`): what is alive now, no verdict spent.
pub fn seats(home: &Home, env: &jurors::Env, probe: bool) -> Result<SeatsReport, ConfigError> {
    let registry = config::load(home)?;
    let probe_ladder = |name: &str, rungs: &[Rung]| LadderProbe {
        ladder: name.to_string(),
        rungs: std::thread::scope(|s| {
            let handles: Vec<_> = rungs
                .iter()
                .map(|r| {
                    s.spawn(move || {
                        if probe {
                            jurors::for_rung(r, env).probe()
                        } else {
                            Probe {
                                state: "unknown".into(),
                                detail: "not probed".into(),
                                context_max: None,
                            }
                        }
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| Probe {
                        state: "unknown".into(),
                        detail: "the probe failed".into(),
                        context_max: None,
                    })
                })
                .collect()
        }),
    };
    let mut probes: Vec<LadderProbe> = registry
        .ladders
        .iter()
        .map(|l| probe_ladder(l.tier.as_str(), &l.rungs))
        .collect();
    probes.push(probe_ladder("verifier", &registry.verifier));
    Ok(SeatsReport {
        registry,
        probes,
        notes: Vec::new(),
    })
}

/// The file names a round writes in its folder: a folder holding any of these without the
/// stamp is not ours.
fn is_round_shape(name: &str) -> bool {
    name == "round.json"
        || name == "envelope.txt"
        || (name.starts_with("verdict-") && name.ends_with(".json"))
        || (name.starts_with("prompt-") && name.ends_with(".txt"))
}

/// Claims `dir` for `round`: makes it (0700) when absent; refuses a folder with files of a
/// round's shapes and no stamp; sweeps the files of those shapes from a folder proctor
/// stamped before; writes the stamp. Foreign files of other shapes are left alone.
fn claim(dir: &Path, round: &str) -> Result<(), RoundError> {
    let refuse = |why: String| RoundError::OutDir(dir.display().to_string(), why);
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.file_type().is_symlink() => {
            return Err(refuse(
                "it is a symbolic link; name the folder itself".into(),
            ));
        }
        Ok(m) if !m.is_dir() => return Err(refuse("it is not a folder".into())),
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(dir).map_err(|e| refuse(e.to_string()))?;
        }
        Err(e) => return Err(refuse(e.to_string())),
    }
    files::ensure_private_dir(dir)?;
    let stamp = dir.join(STAMP_FILE);
    let stamped = match store::read_private(&stamp) {
        Ok(Some(bytes)) => serde_json::from_slice::<Value>(&bytes)
            .ok()
            .and_then(|v| v.get("format").and_then(Value::as_str).map(str::to_string))
            .is_some_and(|f| f == STAMP_FORMAT),
        Ok(None) => false,
        Err(e) => return Err(refuse(format!("its stamp cannot be read: {e}"))),
    };
    let mut ours = Vec::new();
    let rd = std::fs::read_dir(dir).map_err(|e| refuse(e.to_string()))?;
    for entry in rd {
        let entry = entry.map_err(|e| refuse(e.to_string()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if is_round_shape(&name) {
            ours.push(name);
        }
    }
    ours.sort();
    if !stamped && !ours.is_empty() {
        return Err(RoundError::OutDirRefused {
            dir: dir.display().to_string(),
            files: ours.join(", "),
        });
    }
    for name in &ours {
        let p = dir.join(name);
        if std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_file()) {
            std::fs::remove_file(&p).map_err(|e| refuse(format!("{name}: {e}")))?;
        }
    }
    let body = json!({"format": STAMP_FORMAT, "round": round}).to_string();
    files::write_atomic(&stamp, body.as_bytes())?;
    Ok(())
}

/// A finding's key for counting NEW findings across rounds: the lens, the severity and the
/// claim with case and spacing folded.
fn finding_key(lens: &str, f: &Finding) -> String {
    let claim: String = f
        .claim
        .to_lowercase()
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    format!("{lens}\u{0}{}\u{0}{claim}", f.severity.as_str())
}

fn seat_findings(seat: &Seat) -> Vec<Finding> {
    let mut out = Vec::new();
    if let Some(Judged::Verdict { verdict, .. }) = &seat.judged {
        out.extend(verdict.findings.iter().cloned());
    }
    if let Some(Verification {
        judged: Some(Judged::Verdict { verdict, .. }),
        ..
    }) = &seat.verification
    {
        out.extend(verdict.findings.iter().cloned());
    }
    out
}

/// One lens's seat, walked down its ladder.
struct Seating<'a> {
    round: &'a str,
    lens: &'a Lens,
    registry: &'a Registry,
    excluded: &'a BTreeSet<String>,
    builder: &'a str,
    solo: bool,
    envelope: &'a Envelope,
    env: &'a jurors::Env,
    work: &'a Path,
}

/// What asking one ladder gave.
struct Walk {
    attempts: Vec<Attempt>,
    sat: Option<(SatOn, Judged)>,
    off_lens: usize,
}

impl Seating<'_> {
    fn walk(&self, ladder_name: &str, rungs: &[Rung], also_refuse: Option<&str>) -> Walk {
        let mut w = Walk {
            attempts: Vec::new(),
            sat: None,
            off_lens: 0,
        };
        let prompt_for = |run_id: &str| envelope::render(self.envelope, self.lens, run_id);
        for (i, rung) in rungs.iter().enumerate() {
            let run_id = format!("{}/{}/{ladder_name}-{i}", self.round, self.lens.name);
            let mut at = Attempt {
                rung: i,
                ladder: ladder_name.to_string(),
                backend: rung.backend,
                model: rung.model.clone(),
                family: rung.family.clone(),
                outcome: AttemptOutcome::Dead,
                reason: String::new(),
                run_id: None,
                raw_tail: None,
                duration_ms: 0,
            };
            if !self.solo && self.excluded.contains(&rung.family) {
                at.outcome = AttemptOutcome::BuilderFamily;
                at.reason = format!(
                    "family {} is excluded: the builder is {} (same vendor = same family); refused before any send",
                    rung.family, self.builder
                );
                w.attempts.push(at);
                continue;
            }
            if also_refuse == Some(rung.family.as_str()) {
                at.outcome = AttemptOutcome::SameFamilyAsPrimary;
                at.reason = format!(
                    "family {} is the primary seat's: a verifier is never of the seat's family",
                    rung.family
                );
                w.attempts.push(at);
                continue;
            }
            let prompt = prompt_for(&run_id);
            let tokens = envelope::estimate_tokens(&prompt);
            let schema = verdict::schema(&self.lens.name);
            let workdir = self
                .work
                .join(format!("{}-{ladder_name}-{i}", self.lens.name));
            let _ = std::fs::create_dir_all(&workdir);
            let _ = files::ensure_private_dir(&workdir);
            let call = Call {
                run_id: &run_id,
                lens: &self.lens.name,
                prompt: &prompt,
                prompt_tokens: tokens,
                schema: &schema,
                deadline: Duration::from_secs(rung.timeout_secs.max(1)),
                workdir: workdir.clone(),
            };
            let juror = jurors::for_rung(rung, self.env);
            let started = Instant::now();
            let reply = juror.convene(&call);
            at.duration_ms = started.elapsed().as_millis() as u64;
            let _ = std::fs::remove_dir_all(&workdir);
            match reply {
                Reply::Capacity { needed, max } => {
                    at.outcome = AttemptOutcome::Capacity;
                    at.reason = format!(
                        "the prompt needs about {needed} tokens; {} holds {max}: skipped before sending",
                        rung.model
                    );
                }
                Reply::NoAnswer { reason, dead } => {
                    at.run_id = Some(run_id);
                    at.outcome = if dead {
                        AttemptOutcome::Dead
                    } else {
                        AttemptOutcome::NoAnswer
                    };
                    at.reason = format!("never answered: {reason}; re-seated down the ladder");
                }
                Reply::Answered { text } => {
                    at.run_id = Some(run_id);
                    match verdict::judge(&text, &self.lens.name) {
                        Judged::OffLens { answered, raw_tail } => {
                            w.off_lens += 1;
                            at.outcome = AttemptOutcome::WrongLens;
                            at.reason = format!(
                                "answered for lens {answered:?}, seated for {:?}: a rejected rung, not a verdict",
                                self.lens.name
                            );
                            at.raw_tail = Some(raw_tail);
                        }
                        judged => {
                            at.outcome = AttemptOutcome::Sat;
                            at.reason = match &judged {
                                Judged::Bad { problem, .. } => {
                                    format!("answered badly ({problem}): counts as refuse")
                                }
                                _ => "answered a verdict for this lens".to_string(),
                            };
                            if let Judged::Bad { raw_tail, .. } = &judged {
                                at.raw_tail = Some(raw_tail.clone());
                            }
                            w.sat = Some((
                                SatOn {
                                    ladder: ladder_name.to_string(),
                                    rung: i,
                                    backend: rung.backend,
                                    model: rung.model.clone(),
                                    family: rung.family.clone(),
                                    local: rung.local,
                                },
                                judged,
                            ));
                            w.attempts.push(at);
                            return w;
                        }
                    }
                }
            }
            w.attempts.push(at);
        }
        w
    }

    fn seat(&self) -> Seat {
        let mut seat = Seat {
            lens: self.lens.name.clone(),
            tier: self.lens.tier,
            charter: self.lens.charter.clone(),
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
        let primary = self.walk("primary", self.registry.ladder(self.lens.tier), None);
        seat.routing = primary.attempts;
        let Some((sat, judged)) = primary.sat else {
            if primary.off_lens > 0
                && seat
                    .routing
                    .iter()
                    .all(|a| a.outcome != AttemptOutcome::NoAnswer)
                && seat
                    .routing
                    .iter()
                    .filter(|a| a.run_id.is_some())
                    .all(|a| a.outcome == AttemptOutcome::WrongLens)
            {
                seat.state = SeatState::Rejected;
                seat.cause = Some(format!(
                    "every juror that answered answered for another lens ({} rejected rungs): held",
                    primary.off_lens
                ));
            } else {
                seat.state = SeatState::Hold;
                seat.cause = Some(hold_cause(&seat.routing));
            }
            return seat;
        };
        let counted = match &judged {
            Judged::Verdict { counted, .. } => *counted,
            Judged::Bad { .. } => Word::Refuse,
            Judged::OffLens { .. } => Word::Refuse,
        };
        seat.findings = match &judged {
            Judged::Verdict { verdict, .. } => Counts::of(&verdict.findings),
            _ => Counts::default(),
        };
        let local_fast = self.lens.tier == Tier::FastStructural && sat.local;
        seat.sat = Some(sat.clone());
        seat.judged = Some(judged.clone());
        match counted {
            Word::Refuse => {
                seat.state = SeatState::Refuse;
                seat.cause = Some(match &judged {
                    Judged::Bad { problem, .. } => {
                        format!("{} answered badly ({problem}): counts as refuse", sat.model)
                    }
                    Judged::Verdict { notes, .. } if !notes.is_empty() => notes.join("; "),
                    _ => format!("{} ({}) refused", sat.model, sat.family),
                });
            }
            Word::Pass if local_fast => {
                let v = self.walk("verifier", &self.registry.verifier, Some(&sat.family));
                seat.routing.extend(v.attempts);
                match v.sat {
                    None => {
                        seat.state = SeatState::Unverified;
                        seat.verification = Some(Verification {
                            state: "none".into(),
                            sat: None,
                            judged: None,
                        });
                        seat.cause = Some(format!(
                            "UNVERIFIED: {} passed on a local model and no verifier of another family answered; the local verdict is kept, the lens is a hold",
                            sat.model
                        ));
                    }
                    Some((vsat, vjudged)) => {
                        let vword = match &vjudged {
                            Judged::Verdict { counted, .. } => *counted,
                            _ => Word::Refuse,
                        };
                        if let Judged::Verdict { verdict, .. } = &vjudged {
                            seat.findings.add(Counts::of(&verdict.findings));
                        }
                        seat.state = if vword == Word::Pass {
                            SeatState::Pass
                        } else {
                            SeatState::Refuse
                        };
                        seat.cause = Some(format!(
                            "{} passed locally; the verifier {} ({}) {}",
                            sat.model,
                            vsat.model,
                            vsat.family,
                            if vword == Word::Pass {
                                "passed the same prompt"
                            } else {
                                "refused the same prompt: the lens refuses"
                            }
                        ));
                        seat.verification = Some(Verification {
                            state: if vword == Word::Pass {
                                "pass"
                            } else {
                                "refuse"
                            }
                            .into(),
                            sat: Some(vsat),
                            judged: Some(vjudged),
                        });
                    }
                }
            }
            Word::Pass => {
                seat.state = SeatState::Pass;
                seat.cause = Some(format!("{} ({}) passed", sat.model, sat.family));
            }
        }
        seat
    }
}

fn hold_cause(routing: &[Attempt]) -> String {
    if routing.is_empty() {
        return "the ladder has no rung: held".into();
    }
    let mut by: BTreeMap<&str, usize> = BTreeMap::new();
    for a in routing {
        *by.entry(a.outcome.as_str()).or_default() += 1;
    }
    let parts: Vec<String> = by.iter().map(|(k, n)| format!("{n} {k}")).collect();
    format!(
        "no juror sat ({}): held, never handed back to the builder",
        parts.join(", ")
    )
}

/// Everything about the round that the seats' threads share.
struct Recorder<'a> {
    home: &'a Home,
    ledger: &'a Ledger,
    round: Mutex<Round>,
    errors: Mutex<Vec<String>>,
}

impl Recorder<'_> {
    fn save(&self) {
        let r = self.round.lock().unwrap_or_else(|p| p.into_inner()).clone();
        if let Err(e) = store::write(self.home, &r) {
            self.error(format!("the round's record: {e}"));
        }
        let copy = Path::new(&r.out_dir).join("round.json");
        if let Err(e) = files::write_atomic(&copy, &store::bytes(&r)) {
            self.error(format!("{}: {e}", copy.display()));
        }
    }
    fn error(&self, e: String) {
        self.errors
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(e);
    }
    fn append(&self, kind: &str, fields: Value) {
        let Value::Object(map) = fields else { return };
        if let Err(e) = self.ledger.append(kind, &map) {
            self.error(format!("ledger {kind}: {e}"));
        }
    }
    /// Writes a decided seat's verdict file, puts it in the record and saves the record.
    fn decided(&self, index: usize, mut seat: Seat, prior: &BTreeSet<String>) {
        let (id, out, identity, env) = {
            let r = self.round.lock().unwrap_or_else(|p| p.into_inner());
            (
                r.id.clone(),
                r.out_dir.clone(),
                r.identity.clone(),
                r.envelope.clone(),
            )
        };
        // Info findings say what a juror checked; they are not defects to fix.
        seat.new_findings = seat_findings(&seat)
            .iter()
            .filter(|f| f.severity != Severity::Info)
            .filter(|f| !prior.contains(&finding_key(&seat.lens, f)))
            .count() as u32;
        let name = format!("verdict-{}.json", seat.lens);
        let doc = json!({
            "format": "proctor-tribunal-verdict/1",
            "round": id,
            "identity": identity,
            "envelope": {"recipe": env.recipe, "digest": env.digest},
            "seat": seat,
        });
        let mut bytes = crate::ledger::canonical::to_vec(&doc).unwrap_or_default();
        bytes.push(b'\n');
        match files::write_atomic(&Path::new(&out).join(&name), &bytes) {
            Ok(()) => seat.verdict_file = Some(name),
            Err(e) => self.error(format!("{name}: {e}")),
        }
        let fields = json!({
            "round": id,
            "lens": seat.lens,
            "state": seat.state.as_str(),
            "backend": seat.sat.as_ref().map(|s| s.backend.as_str()),
            "model": seat.sat.as_ref().map(|s| s.model.clone()),
            "family": seat.sat.as_ref().map(|s| s.family.clone()),
        });
        {
            let mut r = self.round.lock().unwrap_or_else(|p| p.into_inner());
            r.seats[index] = seat;
            // The totals so far, so a reader of a round in progress sees them grow.
            let mut total = Counts::default();
            for s in &r.seats {
                total.add(s.findings);
            }
            r.findings = total;
            r.new_findings = r.seats.iter().map(|s| s.new_findings).sum();
            let decided = r
                .seats
                .iter()
                .filter(|s| s.state != SeatState::Pending)
                .count();
            r.causes = vec![format!(
                "in progress: {decided} of {} seats decided",
                r.seats.len()
            )];
        }
        self.append(SEAT_KIND, fields);
        self.save();
    }
}

fn validate(req: &Convene) -> Result<(), RoundError> {
    let intent = req.intent.trim();
    if intent.is_empty() || intent.contains('\n') || intent.len() > MAX_INTENT_BYTES {
        return Err(RoundError::BadRequest(format!(
            "the intent must be one non-empty line of at most {MAX_INTENT_BYTES} bytes (--intent \"what the change does\")"
        )));
    }
    if req.criteria.trim().is_empty() || req.criteria.len() > MAX_CRITERIA_BYTES {
        return Err(RoundError::BadRequest(format!(
            "the criteria must be a non-empty text of at most {MAX_CRITERIA_BYTES} bytes (--criteria FILE)"
        )));
    }
    if req.builder.trim().is_empty() {
        return Err(RoundError::BadRequest(
            "--builder is required: name the model or family that built the candidate, so its family is excluded"
                .into(),
        ));
    }
    if req.intent.contains('\0') || req.criteria.contains('\0') {
        return Err(RoundError::BadRequest(
            "the intent and criteria may not hold NUL bytes".into(),
        ));
    }
    Ok(())
}

/// What the run's record says of who made the candidate: its tool's family and the strings
/// the envelope must not carry.
fn run_identity(home: &Home, run_ref: &str) -> (Option<String>, Vec<(String, String)>) {
    let Ok(Some(rec)) = crate::sessions::stored_record(home, run_ref) else {
        return (None, Vec::new());
    };
    let mut strings = vec![
        ("the run's tool".to_string(), rec.tool.clone()),
        ("the run's profile".to_string(), rec.profile.clone()),
    ];
    if let Some(name) = &rec.name {
        strings.push(("the run's name".to_string(), name.clone()));
    }
    if let Some(c) = rec.derive().conversation_id {
        strings.push(("the run's conversation id".to_string(), c));
    }
    let family = config::family_of_tool(&rec.tool).map(str::to_string);
    (family, strings)
}

/// The test patterns of the approved policy's `[tribunal]` section (empty: the envelope's
/// defaults).
fn test_patterns(policy: Option<&checks::ApprovedPolicy>) -> Vec<String> {
    policy
        .and_then(|p| crate::workspaces::policy::Policy::parse(&p.text).ok())
        .and_then(|p| p.tribunal.map(|t| t.tests))
        .unwrap_or_default()
}

/// Convenes a round on a candidate: blocking, synchronous; the record is written as seats
/// decide (see the module's doc for the order).
pub fn convene(ctx: &Ctx<'_>, req: &Convene, by: &Actor) -> Result<Round, RoundError> {
    validate(req)?;
    let cand = candidate::load(ctx.home, &req.candidate)
        .map_err(|e| RoundError::Envelope(e.to_string()))?
        .ok_or_else(|| RoundError::UnknownCandidate(req.candidate.clone()))?;
    match candidate::currency(&cand) {
        Currency::Current => {}
        Currency::Changed { now } => {
            return Err(RoundError::Stale(format!(
                "{} no longer holds its bytes (now {})",
                cand.id,
                &now.digest[..12.min(now.digest.len())]
            )));
        }
        Currency::Unavailable { detail, .. } => {
            return Err(RoundError::Stale(format!(
                "{}'s bytes cannot be read now: {detail}",
                cand.id
            )));
        }
    }
    let registry = config::load(ctx.home)?;
    let builder_family = config::builder_families(&registry, req.builder.trim())?;
    let (run_family, run_strings) = run_identity(ctx.home, &cand.run_ref);
    let mut excluded = BTreeSet::from([builder_family.clone()]);
    let mut forbidden = Forbidden::for_builder(req.builder.trim(), &builder_family);
    if let Some(f) = &run_family {
        excluded.insert(f.clone());
        forbidden.add("the run's tool's family", f);
        for p in envelope::model_id_prefixes(f) {
            forbidden.add("a model id of the run's tool's family", p);
        }
    }
    for (what, string) in &run_strings {
        forbidden.add(what, string);
    }
    forbidden.add_authors(&envelope::authors_at(&cand.repo, &cand.identity.base));

    // One round per candidate at a time; none again on bytes already judged.
    {
        let mut live = ctx.live.lock();
        if let Some(r) = live.get(&cand.id) {
            return Err(RoundError::InProgress {
                candidate: cand.id.clone(),
                round: r.clone(),
            });
        }
        live.insert(cand.id.clone(), "(starting)".into());
    }
    let _guard = LiveGuard {
        live: ctx.live,
        candidate: cand.id.clone(),
    };
    let prior_rounds = store::list(ctx.home, None, Some(&cand.run_ref))?;
    if let Some(done) = prior_rounds.iter().find(|r| {
        r.identity.digest == cand.identity.digest
            && matches!(r.state, RoundState::UnanimousPass | RoundState::Refused)
    }) {
        return Err(RoundError::AlreadyJudged {
            round: done.id.clone(),
            state: done.state.as_str().into(),
        });
    }

    let policy = checks::approved_policy(ctx.home, &cand).unwrap_or(None);
    let envelope = envelope::build(
        &cand,
        &Contract {
            intent: req.intent.trim().to_string(),
            criteria: req.criteria.clone(),
        },
        &forbidden,
        &test_patterns(policy.as_ref()),
    )
    .map_err(|e| {
        if e.code() == "leak" {
            RoundError::Leak(e.to_string())
        } else if e.code() == "stale" {
            RoundError::Stale(e.to_string())
        } else {
            RoundError::Envelope(e.to_string())
        }
    })?;

    // The folder is claimed before anything is written in it.
    let id = store::reserve(ctx.home)?;
    ctx.live.lock().insert(cand.id.clone(), id.clone());
    let out = match &req.out {
        Some(dir) => dir.clone(),
        None => store::dir(ctx.home).join(&id),
    };
    if let Err(e) = claim(&out, &id) {
        let _ = std::fs::remove_file(store::record_path(ctx.home, &id)?);
        return Err(e);
    }
    files::write_atomic(&out.join("envelope.txt"), envelope.text.as_bytes())?;
    let out_dir = std::fs::canonicalize(&out).unwrap_or(out.clone());

    let solo = req.solo;
    let mode = if solo {
        Mode::SameFamilyBlind
    } else {
        Mode::CrossFamily
    };
    let number = prior_rounds
        .iter()
        .filter(|r| r.state != RoundState::InProgress)
        .count() as u32
        + 1;
    let round = Round {
        format: ROUND_FORMAT.into(),
        id: id.clone(),
        candidate: cand.id.clone(),
        run_ref: cand.run_ref.clone(),
        number,
        identity: DigestRef {
            recipe: IDENTITY_RECIPE.into(),
            digest: cand.identity.digest.clone(),
        },
        envelope: envelope.reference.clone(),
        builder: req.builder.trim().to_string(),
        builder_family: builder_family.clone(),
        excluded_families: excluded.iter().cloned().collect(),
        mode,
        mode_note: if solo {
            "graded same-family-blind, not cross-family".into()
        } else {
            "graded cross-family".into()
        },
        intent: req.intent.trim().to_string(),
        criteria_sha256: sha256_hex(req.criteria.as_bytes()),
        state: RoundState::InProgress,
        started_at: now(),
        ended_at: None,
        by: by.clone(),
        out_dir: out_dir.display().to_string(),
        seats: registry
            .lenses
            .iter()
            .map(|l| Seat {
                lens: l.name.clone(),
                tier: l.tier,
                charter: l.charter.clone(),
                state: SeatState::Pending,
                sat: None,
                routing: Vec::new(),
                judged: None,
                verification: None,
                findings: Counts::default(),
                new_findings: 0,
                verdict_file: None,
                cause: None,
            })
            .collect(),
        engine: None,
        findings: Counts::default(),
        new_findings: 0,
        convergence: None,
        causes: vec![
            "in progress: the engine runs its own checks before any juror is asked".into(),
        ],
    };
    let rec = Recorder {
        home: ctx.home,
        ledger: ctx.ledger,
        round: Mutex::new(round),
        errors: Mutex::new(Vec::new()),
    };
    rec.save();
    rec.append(
        STARTED_KIND,
        json!({
            "round": id,
            "candidate": cand.id,
            "run": cand.run_ref,
            "identity": cand.identity.digest,
            "identity_recipe": IDENTITY_RECIPE,
            "envelope": envelope.reference.digest,
            "envelope_recipe": ENVELOPE_RECIPE,
            "builder": req.builder.trim(),
            "builder_family": builder_family,
            "excluded_families": excluded.iter().cloned().collect::<Vec<_>>(),
            "mode": if solo { "same_family_blind" } else { "cross_family" },
            "by": serde_json::to_value(by).unwrap_or(Value::Null),
        }),
    );

    // The engine's own checks first: a harness that cannot judge asks no juror.
    let report = match &policy {
        Some(p) => engine::run(ctx.home, ctx.ledger, &cand, p),
        None => EngineReport {
            state: "not_configured".into(),
            red_commit: None,
            red_seq: None,
            tests: Vec::new(),
            tests_unchanged: true,
            steps: Vec::new(),
            cause: Some(
                "the workspace has no approved check policy: the engine did not check (`proctor workspace approve-policy`)"
                    .into(),
            ),
        },
    };
    let engine_state = report.state.clone();
    {
        let mut r = rec.round.lock().unwrap_or_else(|p| p.into_inner());
        r.engine = Some(report);
        r.causes = vec![format!(
            "in progress: the engine says {engine_state}; seating {} lenses",
            r.seats.len()
        )];
    }
    rec.save();

    let prior_keys: BTreeSet<String> = prior_rounds
        .iter()
        .filter(|r| r.state != RoundState::Invalid)
        .flat_map(|r| {
            r.seats
                .iter()
                .flat_map(|s| {
                    seat_findings(s)
                        .into_iter()
                        .map(|f| finding_key(&s.lens, &f))
                })
                .collect::<Vec<_>>()
        })
        .collect();
    if engine_state == "ok" || engine_state == "not_configured" {
        let work = store::dir(ctx.home).join(format!("{id}.work"));
        let _ = std::fs::create_dir_all(&work);
        let _ = files::ensure_private_dir(&work);
        std::thread::scope(|s| {
            for (index, lens) in registry.lenses.iter().enumerate() {
                let seating = Seating {
                    round: &id,
                    lens,
                    registry: &registry,
                    excluded: &excluded,
                    builder: req.builder.trim(),
                    solo,
                    envelope: &envelope,
                    env: &ctx.env,
                    work: &work,
                };
                let rec = &rec;
                let prior = &prior_keys;
                s.spawn(move || {
                    let seat = match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        seating.seat()
                    })) {
                        Ok(seat) => seat,
                        Err(_) => {
                            let mut seat = rec
                                .round
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .seats[index]
                                .clone();
                            seat.state = SeatState::Hold;
                            seat.cause = Some(
                                "the seat failed inside proctor (see the server log): held; the other seats' verdicts are kept"
                                    .into(),
                            );
                            seat
                        }
                    };
                    rec.decided(index, seat, prior);
                });
            }
        });
        let _ = std::fs::remove_dir_all(&work);
    }

    // The round's outcome.
    let mut round = rec.round.lock().unwrap_or_else(|p| p.into_inner()).clone();
    finish(&mut round, &prior_rounds, &engine_state);
    let round_bytes = store::bytes(&round);
    *rec.round.lock().unwrap_or_else(|p| p.into_inner()) = round.clone();
    rec.save();
    rec.append(
        RECORDED_KIND,
        json!({
            "round": round.id,
            "candidate": round.candidate,
            "run": round.run_ref,
            "identity": round.identity.digest,
            "identity_recipe": IDENTITY_RECIPE,
            "envelope": round.envelope.digest,
            "state": round.state.as_str(),
            "mode": if solo { "same_family_blind" } else { "cross_family" },
            "unanimous": round.counts_for_gate(),
            "new_findings": round.new_findings,
            "round_sha256": sha256_hex(&round_bytes),
            "by": serde_json::to_value(by).unwrap_or(Value::Null),
        }),
    );
    let errors = rec.errors.into_inner().unwrap_or_else(|p| p.into_inner());
    if let Some(first) = errors.first() {
        // Everything that could be written is written: only now is the error raised.
        return Err(RoundError::Ledger(format!(
            "{first} ({} problem(s) in all; the round's record and verdicts were written first)",
            errors.len()
        )));
    }
    Ok(round)
}

/// Decides the round's state, findings, trend and convergence from its seats and engine.
fn finish(round: &mut Round, prior: &[Round], engine_state: &str) {
    let mut causes = Vec::new();
    let mut total = Counts::default();
    let mut new = 0;
    for s in &round.seats {
        total.add(s.findings);
        new += s.new_findings;
    }
    round.findings = total;
    round.new_findings = new;
    let engine_cause = round
        .engine
        .as_ref()
        .and_then(|e| e.cause.clone())
        .unwrap_or_default();
    let refused: Vec<&str> = round
        .seats
        .iter()
        .filter(|s| s.state == SeatState::Refuse)
        .map(|s| s.lens.as_str())
        .collect();
    let held: Vec<String> = round
        .seats
        .iter()
        .filter(|s| {
            matches!(
                s.state,
                SeatState::Hold | SeatState::Unverified | SeatState::Rejected | SeatState::Pending
            )
        })
        .map(|s| format!("{} ({})", s.lens, s.state.as_str()))
        .collect();
    let passes: Vec<&Seat> = round
        .seats
        .iter()
        .filter(|s| s.state == SeatState::Pass)
        .collect();
    let all_bare = !passes.is_empty()
        && passes
            .iter()
            .all(|s| matches!(&s.judged, Some(Judged::Verdict { bare: true, .. })));
    round.state = if engine_state == "invalid" {
        causes.push(format!(
            "the harness cannot judge: {engine_cause}; no juror was asked and no verdict of this round counts"
        ));
        RoundState::Invalid
    } else if engine_state == "refuse" {
        causes.push(format!(
            "the engine refused: {engine_cause}; no juror was asked"
        ));
        RoundState::Refused
    } else if !refused.is_empty() {
        causes.push(format!("refused by {}", refused.join(", ")));
        RoundState::Refused
    } else if !held.is_empty() {
        causes.push(format!("held: {}", held.join(", ")));
        RoundState::Held
    } else if round.seats.is_empty() {
        causes.push("no lens is configured".into());
        RoundState::Held
    } else if all_bare {
        causes.push(
            "every pass is bare (no findings, no evidence): a bare pass counts but is never the only evidence"
                .into(),
        );
        RoundState::Held
    } else {
        causes.push(format!(
            "unanimous: {} of {} seats passed",
            passes.len(),
            round.seats.len()
        ));
        RoundState::UnanimousPass
    };
    if engine_state == "not_configured" {
        causes.push(format!("the engine did not check: {engine_cause}"));
    }
    if round.mode == Mode::SameFamilyBlind {
        causes.push("graded same-family-blind, not cross-family: it never satisfies a gate".into());
    }
    let mut trend: Vec<u32> = prior
        .iter()
        .filter(|r| {
            r.run_ref == round.run_ref
                && r.id != round.id
                && !matches!(r.state, RoundState::Invalid | RoundState::InProgress)
        })
        .map(|r| r.new_findings)
        .collect();
    trend.push(round.new_findings);
    round.convergence = Some(if round.state == RoundState::UnanimousPass {
        Convergence {
            state: "unanimous".into(),
            trend,
            cause: "unanimous pass on these bytes: the gate may open; then prove it live".into(),
        }
    } else if round.state == RoundState::Invalid {
        Convergence {
            state: "converging".into(),
            trend,
            cause: "an invalid round measures nothing: mend the harness and convene again".into(),
        }
    } else {
        let n = trend.len();
        if n >= 3 && trend[n - 1] >= trend[n - 2] && trend[n - 2] >= trend[n - 3] {
            Convergence {
                state: "stop".into(),
                cause: format!(
                    "new findings stable or rising two rounds in a row ({}): stop and hand it to a person",
                    trend
                        .iter()
                        .map(u32::to_string)
                        .collect::<Vec<_>>()
                        .join(" → ")
                ),
                trend,
            }
        } else {
            Convergence {
                state: "converging".into(),
                cause: "turn every finding into a failing test, fix, bind again, convene again"
                    .into(),
                trend,
            }
        }
    });
    round.causes = causes;
    round.ended_at = Some(now());
}

/// Rounds a stopped server left `in_progress` (no round survives its server): each becomes
/// `invalid`, its decided seats kept, the cause said, and the ledger told. Called once at
/// the server's start, before it answers.
pub fn recover(home: &Home, ledger: &Ledger) -> Result<Vec<String>, StoreError> {
    let mut mended = Vec::new();
    for mut r in store::list(home, None, None)? {
        if r.state != RoundState::InProgress {
            continue;
        }
        r.state = RoundState::Invalid;
        r.ended_at = Some(now());
        r.causes.push(
            "the server stopped during the round: it is invalid; the seats that decided are kept, convene again"
                .into(),
        );
        store::write(home, &r)?;
        let _ = files::write_atomic(&Path::new(&r.out_dir).join("round.json"), &store::bytes(&r));
        let fields = json!({
            "round": r.id, "candidate": r.candidate, "run": r.run_ref,
            "identity": r.identity.digest, "identity_recipe": IDENTITY_RECIPE,
            "envelope": r.envelope.digest, "state": r.state.as_str(),
            "mode": if r.mode == Mode::SameFamilyBlind { "same_family_blind" } else { "cross_family" },
            "unanimous": false, "new_findings": r.new_findings,
            "round_sha256": sha256_hex(&store::bytes(&r)),
            "by": serde_json::to_value(&r.by).unwrap_or(Value::Null),
        });
        if let Value::Object(map) = fields {
            let _ = ledger.append(RECORDED_KIND, &map);
        }
        mended.push(r.id);
    }
    Ok(mended)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seat(lens: &str, state: SeatState, findings: Vec<Finding>, bare: bool) -> Seat {
        let counted = if state == SeatState::Refuse {
            Word::Refuse
        } else {
            Word::Pass
        };
        Seat {
            lens: lens.into(),
            tier: Tier::Generalist,
            charter: "c".into(),
            state,
            sat: None,
            routing: vec![],
            judged: Some(Judged::Verdict {
                verdict: Verdict {
                    verdict: counted,
                    lens: lens.into(),
                    findings: findings.clone(),
                },
                counted,
                notes: vec![],
                bare,
            }),
            verification: None,
            findings: Counts::of(&findings),
            new_findings: findings.len() as u32,
            verdict_file: None,
            cause: None,
        }
    }

    fn round(id: &str, seats: Vec<Seat>) -> Round {
        Round {
            format: ROUND_FORMAT.into(),
            id: id.into(),
            candidate: "cand-0001".into(),
            run_ref: "run-0001".into(),
            number: 1,
            identity: DigestRef {
                recipe: IDENTITY_RECIPE.into(),
                digest: "ab".into(),
            },
            envelope: EnvelopeRef {
                recipe: ENVELOPE_RECIPE.into(),
                digest: "cd".into(),
                bytes: 1,
                tokens: 1,
                files: vec![],
                file: "envelope.txt".into(),
            },
            builder: "b".into(),
            builder_family: "anthropic".into(),
            excluded_families: vec!["anthropic".into()],
            mode: Mode::CrossFamily,
            mode_note: String::new(),
            intent: "i".into(),
            criteria_sha256: String::new(),
            state: RoundState::InProgress,
            started_at: String::new(),
            ended_at: None,
            by: Actor {
                token_id: "tok-1".into(),
                name: "owner".into(),
                principal: crate::auth::Principal::Person,
            },
            out_dir: "/nonexistent".into(),
            seats,
            engine: None,
            findings: Counts::default(),
            new_findings: 0,
            convergence: None,
            causes: vec![],
        }
    }

    fn finding(sev: Severity, claim: &str) -> Finding {
        Finding {
            severity: sev,
            claim: claim.into(),
            evidence: "e".into(),
        }
    }

    fn done(mut r: Round, new: u32) -> Round {
        r.state = RoundState::Refused;
        r.new_findings = new;
        r
    }

    #[test]
    fn a_refusing_seat_refuses_the_round_and_a_hold_holds_it() {
        let mut r = round(
            "rnd-0001",
            vec![
                seat(
                    "a",
                    SeatState::Pass,
                    vec![finding(Severity::Info, "x")],
                    false,
                ),
                seat(
                    "b",
                    SeatState::Refuse,
                    vec![finding(Severity::Major, "y")],
                    false,
                ),
                seat("c", SeatState::Hold, vec![], false),
            ],
        );
        finish(&mut r, &[], "ok");
        assert_eq!(r.state, RoundState::Refused);
        let mut r = round(
            "rnd-0001",
            vec![
                seat(
                    "a",
                    SeatState::Pass,
                    vec![finding(Severity::Info, "x")],
                    false,
                ),
                seat("c", SeatState::Unverified, vec![], false),
            ],
        );
        finish(&mut r, &[], "ok");
        assert_eq!(r.state, RoundState::Held);
        assert!(!r.counts_for_gate());
    }

    #[test]
    fn unanimity_needs_every_seat_and_one_pass_that_names_what_it_checked() {
        let mut r = round(
            "rnd-0001",
            vec![
                seat("a", SeatState::Pass, vec![], true),
                seat("b", SeatState::Pass, vec![], true),
            ],
        );
        finish(&mut r, &[], "ok");
        assert_eq!(r.state, RoundState::Held, "{:?}", r.causes);
        let mut r = round(
            "rnd-0001",
            vec![
                seat("a", SeatState::Pass, vec![], true),
                seat(
                    "b",
                    SeatState::Pass,
                    vec![finding(Severity::Info, "checked x")],
                    false,
                ),
            ],
        );
        finish(&mut r, &[], "ok");
        assert_eq!(r.state, RoundState::UnanimousPass);
        assert!(r.counts_for_gate());
        r.mode = Mode::SameFamilyBlind;
        assert!(
            !r.counts_for_gate(),
            "same-family-blind never counts for a gate"
        );
    }

    #[test]
    fn the_engine_decides_first() {
        let mut r = round("rnd-0001", vec![seat("a", SeatState::Pass, vec![], false)]);
        finish(&mut r, &[], "invalid");
        assert_eq!(r.state, RoundState::Invalid);
        let mut r = round("rnd-0001", vec![seat("a", SeatState::Pass, vec![], false)]);
        finish(&mut r, &[], "refuse");
        assert_eq!(r.state, RoundState::Refused);
    }

    #[test]
    fn new_findings_stable_or_rising_two_rounds_in_a_row_stop_the_loop() {
        let prior = vec![
            done(round("rnd-0001", vec![]), 3),
            done(round("rnd-0002", vec![]), 3),
        ];
        let mut r = round(
            "rnd-0003",
            vec![seat(
                "a",
                SeatState::Refuse,
                vec![finding(Severity::Minor, "z")],
                false,
            )],
        );
        r.seats[0].new_findings = 4;
        finish(&mut r, &prior, "ok");
        let c = r.convergence.unwrap();
        assert_eq!(c.trend, vec![3, 3, 4]);
        assert_eq!(c.state, "stop", "{}", c.cause);

        let prior = vec![
            done(round("rnd-0001", vec![]), 3),
            done(round("rnd-0002", vec![]), 1),
        ];
        let mut r = round(
            "rnd-0003",
            vec![seat(
                "a",
                SeatState::Refuse,
                vec![finding(Severity::Minor, "z")],
                false,
            )],
        );
        r.seats[0].new_findings = 1;
        finish(&mut r, &prior, "ok");
        assert_eq!(r.convergence.unwrap().state, "converging");
    }

    #[test]
    fn a_finding_is_new_by_lens_severity_and_folded_claim() {
        let a = finding(Severity::Major, "An  error path\treturns OK");
        let b = finding(Severity::Major, "an error path returns ok");
        assert_eq!(finding_key("defect", &a), finding_key("defect", &b));
        assert_ne!(finding_key("defect", &a), finding_key("state", &b));
        let c = finding(Severity::Minor, "an error path returns ok");
        assert_ne!(finding_key("defect", &a), finding_key("defect", &c));
    }

    #[test]
    fn a_folder_with_round_files_and_no_stamp_is_refused_and_nothing_deleted() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("out");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("verdict-defect.json"), b"{}").unwrap();
        std::fs::write(dir.join("notes.md"), b"mine").unwrap();
        let e = claim(&dir, "rnd-0001").unwrap_err();
        assert_eq!(e.code(), "out_dir_refused");
        assert!(e.to_string().contains("verdict-defect.json"), "{e}");
        assert!(dir.join("verdict-defect.json").exists());
        assert!(!dir.join(STAMP_FILE).exists());

        // Foreign files of other shapes are not in danger and do not block.
        let other = d.path().join("other");
        std::fs::create_dir(&other).unwrap();
        std::fs::write(other.join("notes.md"), b"mine").unwrap();
        claim(&other, "rnd-0001").unwrap();
        assert!(other.join(STAMP_FILE).exists());
        // A stamped folder has the old round's files swept, the foreign ones kept.
        std::fs::write(other.join("verdict-x.json"), b"{}").unwrap();
        claim(&other, "rnd-0002").unwrap();
        assert!(!other.join("verdict-x.json").exists());
        assert_eq!(std::fs::read(other.join("notes.md")).unwrap(), b"mine");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(other.join(STAMP_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let link = d.path().join("link");
        std::os::unix::fs::symlink(&other, &link).unwrap();
        assert_eq!(
            claim(&link, "rnd-0003").unwrap_err().code(),
            "out_dir_refused"
        );
    }
}
