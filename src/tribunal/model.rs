//! The tribunal's data: the registry's shapes (lenses, tiers, rungs), what a juror is asked
//! and answers, verdicts, the envelope's reference, the engine's report, and the round's
//! record with its seats and routing. Shared by every part of the tribunal, the wire
//! (`api::tribunal` re-exports them), the CLI and the cockpit.

use serde::{Deserialize, Serialize};

use crate::auth::Actor;

/// The format of a round's record (`data/tribunal/rnd-NNNN.json`, `round.json` in its folder).
pub const ROUND_FORMAT: &str = "proctor-tribunal-round/1";
/// The recipe of an envelope's digest: SHA-256 of the envelope's exact UTF-8 text.
pub const ENVELOPE_RECIPE: &str = "tribunal-envelope-sha256/1";
/// The stamp file that claims an output folder (its content: `{"format", "round"}`).
pub const STAMP_FILE: &str = ".proctor-tribunal";
/// The stamp's format.
pub const STAMP_FORMAT: &str = "proctor-tribunal-stamp/1";
/// At most this many bytes of a rejected or bad answer are kept (`raw_tail`).
pub const RAW_TAIL_BYTES: usize = 2048;
/// The most lenses a registry may hold.
pub const MAX_LENSES: usize = 8;

/// A lens's tier: which ladder seats it (seed 001, "Paliers de routage").
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum Tier {
    /// The largest context and the deepest reasoning, ideally a harness that reads.
    DeepState,
    /// A free local model first, merged with a cheap cloud verifier of another family.
    FastStructural,
    /// The strongest coder anchored on security.
    OperatorSecurity,
    /// A large reliable generalist.
    Generalist,
}

impl Tier {
    pub const ALL: [Tier; 4] = [
        Tier::DeepState,
        Tier::FastStructural,
        Tier::OperatorSecurity,
        Tier::Generalist,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            Tier::DeepState => "deep-state",
            Tier::FastStructural => "fast-structural",
            Tier::OperatorSecurity => "operator-security",
            Tier::Generalist => "generalist",
        }
    }
}

/// One seat's angle.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Lens {
    /// `[a-z][a-z0-9-]{0,31}`, unique.
    pub name: String,
    /// One line: what this juror checks, and only that.
    pub charter: String,
    pub tier: Tier,
}

/// How a rung is reached (closed, like the provider profiles).
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Backend {
    /// `claude -p` with read-only tools (vendor: anthropic).
    Claude,
    /// `codex exec` with the read-only sandbox and an output schema (vendor: openai).
    Codex,
    /// `gemini -p` in plan (read-only) mode (vendor: google).
    Gemini,
    /// An OpenAI-compatible `/v1/chat/completions`.
    Openai,
    /// Ollama's native `/api/chat` (always local).
    Ollama,
}

impl Backend {
    pub fn as_str(self) -> &'static str {
        match self {
            Backend::Claude => "claude",
            Backend::Codex => "codex",
            Backend::Gemini => "gemini",
            Backend::Openai => "openai",
            Backend::Ollama => "ollama",
        }
    }
    /// A provider CLI in its headless read-only form.
    pub fn is_cli(self) -> bool {
        matches!(self, Backend::Claude | Backend::Codex | Backend::Gemini)
    }
    /// The family a CLI backend's vendor is (same vendor = same family); `None` for HTTP.
    pub fn cli_family(self) -> Option<&'static str> {
        match self {
            Backend::Claude => Some("anthropic"),
            Backend::Codex => Some("openai"),
            Backend::Gemini => Some("google"),
            Backend::Openai | Backend::Ollama => None,
        }
    }
}

/// Where an HTTP rung's key comes from. The key itself is never stored, printed or logged.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum KeySource {
    /// An environment variable of the server's environment, by name.
    Env { name: String },
    /// A file (0600, owned by the user), by path.
    File { path: String },
}

/// One rung of a ladder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Rung {
    pub backend: Backend,
    /// The model id as the backend names it.
    pub model: String,
    /// The vendor family, lowercase (`anthropic`, `openai`, `google`, `xai`, `meta`,
    /// `alibaba`, `mistral`, `deepseek`, …). Same vendor = same family.
    pub family: String,
    /// A declared context limit; `null` = large enough for the whole artefact.
    pub context_tokens: Option<u64>,
    /// HTTP backends: the base URL (`http://127.0.0.1:11434`, `https://api.…/v1`).
    pub base_url: Option<String>,
    /// HTTP backends: where the key comes from (`null`: no key sent).
    pub key: Option<KeySource>,
    /// A local survival rung (Ollama always; an OpenAI-compatible server on this machine when
    /// declared `local = true`).
    pub local: bool,
    /// The most a convocation on this rung may take.
    pub timeout_secs: u64,
    /// CLI backends: the provider profile whose account home the juror runs under (`null`:
    /// the server's own environment's login).
    pub profile: Option<String>,
}

/// The registry: the lenses and a ladder per tier, plus the verifier's ladder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = TribunalRegistry)]
pub struct Registry {
    /// `config/tribunal.toml`, or `"default"` when the file is absent.
    pub source: String,
    pub lenses: Vec<Lens>,
    /// One ladder per tier, in the tier's order.
    pub ladders: Vec<Ladder>,
    /// The verifier's ladder: who judges the same prompt when a fast-structural lens sat on
    /// a local model.
    pub verifier: Vec<Rung>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Ladder {
    pub tier: Tier,
    pub rungs: Vec<Rung>,
}

impl Registry {
    pub fn ladder(&self, tier: Tier) -> &[Rung] {
        self.ladders
            .iter()
            .find(|l| l.tier == tier)
            .map(|l| l.rungs.as_slice())
            .unwrap_or(&[])
    }
    /// Every family named by any rung, sorted, once.
    pub fn families(&self) -> Vec<String> {
        let mut f: Vec<String> = self
            .ladders
            .iter()
            .flat_map(|l| l.rungs.iter())
            .chain(self.verifier.iter())
            .map(|r| r.family.clone())
            .collect();
        f.sort();
        f.dedup();
        f
    }
}

/// What a probe of one rung found (no verdict spent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Probe {
    /// `alive`, `dead` or `unknown` (not probed).
    pub state: String,
    /// Why, in a line (the program and version found, the HTTP status, the error).
    pub detail: String,
    /// The model's maximum context where the backend says it (Ollama's `/api/show`).
    pub context_max: Option<u64>,
}

/// `tribunal seats`: the registry, each rung with its probe.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SeatsReport {
    pub registry: Registry,
    /// Per ladder (tier name or `verifier`), per rung in order, its probe.
    pub probes: Vec<LadderProbe>,
    /// Problems that do not make the file invalid but a person should know (none today).
    pub notes: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct LadderProbe {
    /// A tier's name or `verifier`.
    pub ladder: String,
    pub rungs: Vec<Probe>,
}

/// A verdict's word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Word {
    Pass,
    Refuse,
}

#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    Serialize,
    Deserialize,
    utoipa::ToSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    Blocker,
    Major,
    Minor,
    Info,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Blocker => "blocker",
            Severity::Major => "major",
            Severity::Minor => "minor",
            Severity::Info => "info",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Finding {
    pub severity: Severity,
    pub claim: String,
    pub evidence: String,
}

/// The strict verdict object a juror must answer, exactly.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct Verdict {
    pub verdict: Word,
    pub lens: String,
    pub findings: Vec<Finding>,
}

/// Findings counted by severity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Counts {
    pub blocker: u32,
    pub major: u32,
    pub minor: u32,
    pub info: u32,
}

impl Counts {
    pub fn of(findings: &[Finding]) -> Counts {
        let mut c = Counts::default();
        for f in findings {
            match f.severity {
                Severity::Blocker => c.blocker += 1,
                Severity::Major => c.major += 1,
                Severity::Minor => c.minor += 1,
                Severity::Info => c.info += 1,
            }
        }
        c
    }
    pub fn add(&mut self, o: Counts) {
        self.blocker += o.blocker;
        self.major += o.major;
        self.minor += o.minor;
        self.info += o.info;
    }
    pub fn total(&self) -> u32 {
        self.blocker + self.major + self.minor + self.info
    }
}

/// A file the envelope carries, whole.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct EnvelopeFile {
    pub path: String,
    /// `changed` (touched by the change), `deleted` (named, no content) or `test` (a test
    /// file of a touched one).
    pub role: String,
    pub bytes: u64,
    /// `bytes-sha256/1`.
    pub sha256: String,
}

/// What a round's envelope was.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct EnvelopeRef {
    /// [`ENVELOPE_RECIPE`].
    pub recipe: String,
    pub digest: String,
    pub bytes: u64,
    /// The estimate of its size in tokens that capacity checks use (see `envelope`).
    pub tokens: u64,
    pub files: Vec<EnvelopeFile>,
    /// The file in the round's folder that holds it (`envelope.txt`).
    pub file: String,
}

/// One step the engine ran (a policy argv on one tree).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct EngineStep {
    /// `baseline`, `new_tests`, `regression`, `anti_false_green`.
    pub name: String,
    /// Which tree: `red^` (the red commit's parent), `candidate`, `red` (the candidate with
    /// every non-test change reverted).
    pub tree: String,
    pub argv: Vec<String>,
    /// What it must do: `pass` or `fail`.
    pub expect: String,
    /// `passed`, `failed`, `timed_out`, `not_started`, `skipped`.
    pub outcome: String,
    pub exit_code: Option<i32>,
    pub duration_ms: u64,
    /// Whether the outcome is what `expect` asks (a timeout is never).
    pub holds: bool,
    /// The last bytes of its output, sanitised for display by the faces.
    pub output_tail: String,
    /// For `anti_false_green`: the files that were rewritten (reverted) to make its tree.
    pub changed_paths: Vec<String>,
}

/// What the engine checked, not only read (section 5 of issue 14).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct EngineReport {
    /// `ok` (every step holds), `refuse` (a step does not: a false green, a new test
    /// failing, the suite worse than the base, a test file changed since red), `invalid`
    /// (the harness cannot judge: its baseline is not clean green, a step timed out, no
    /// red commit recorded), `not_configured` (the policy has no `[tribunal]` section).
    pub state: String,
    /// The red-first commit the round was judged against, and its ledger record.
    pub red_commit: Option<String>,
    pub red_seq: Option<u64>,
    /// The test files (by the policy's patterns) that must be unchanged since red.
    pub tests: Vec<String>,
    /// Whether every one of them is byte-identical to the red commit's.
    pub tests_unchanged: bool,
    pub steps: Vec<EngineStep>,
    pub cause: Option<String>,
}

/// A seat's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum SeatState {
    /// Not decided yet (the round is in progress).
    Pending,
    Pass,
    Refuse,
    /// No juror answered (every rung refused, dead, silent or out of capacity).
    Hold,
    /// A fast-structural lens passed on a local model with no verifier of another family:
    /// the local verdict is kept, the lens is a hold.
    Unverified,
    /// Every rung that answered answered for another lens: held.
    Rejected,
}

impl SeatState {
    pub fn as_str(self) -> &'static str {
        match self {
            SeatState::Pending => "pending",
            SeatState::Pass => "pass",
            SeatState::Refuse => "refuse",
            SeatState::Hold => "hold",
            SeatState::Unverified => "unverified",
            SeatState::Rejected => "rejected",
        }
    }
}

/// What happened on one rung for one seat.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum AttemptOutcome {
    /// It answered a verdict for this lens (or an answer that counts as refuse): it sat.
    Sat,
    /// Its family is the builder's: refused before any send.
    BuilderFamily,
    /// The verifier's family is the primary seat's: refused before any send.
    SameFamilyAsPrimary,
    /// The prompt does not fit its context: refused before any send (typed, the ladder goes on).
    Capacity,
    /// The probe or the transport says it is not there (connection refused, no program).
    Dead,
    /// It never answered (timeout, empty answer, a reasoning model that spent its budget).
    NoAnswer,
    /// It answered for another lens: a rejected rung.
    WrongLens,
}

impl AttemptOutcome {
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptOutcome::Sat => "sat",
            AttemptOutcome::BuilderFamily => "builder_family",
            AttemptOutcome::SameFamilyAsPrimary => "same_family_as_primary",
            AttemptOutcome::Capacity => "capacity",
            AttemptOutcome::Dead => "dead",
            AttemptOutcome::NoAnswer => "no_answer",
            AttemptOutcome::WrongLens => "wrong_lens",
        }
    }
}

/// One line of a seat's routing table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Attempt {
    /// The rung's index in its ladder (0-based).
    pub rung: usize,
    /// `primary` (the lens's tier ladder) or `verifier`.
    pub ladder: String,
    pub backend: Backend,
    pub model: String,
    pub family: String,
    pub outcome: AttemptOutcome,
    /// Why, in words (the builder's family named, the capacity figures, the error).
    pub reason: String,
    /// The convocation's id (`rnd-0001/defect/2`); `null` when nothing was sent.
    pub run_id: Option<String>,
    /// For a wrong lens or a bad answer: the last [`RAW_TAIL_BYTES`] bytes it said.
    pub raw_tail: Option<String>,
    pub duration_ms: u64,
}

/// The rung a seat sat on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct SatOn {
    pub ladder: String,
    pub rung: usize,
    pub backend: Backend,
    pub model: String,
    pub family: String,
    pub local: bool,
}

/// How an answer was read (see `verdict::judge`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Judged {
    /// A verdict object for the seated lens. `counted` is what it counts as (a pass listing
    /// a blocker or major finding counts as refuse); `notes` say why when it differs;
    /// `bare` is a pass with no findings and no evidence (it counts, never alone).
    Verdict {
        verdict: Verdict,
        counted: Word,
        notes: Vec<String>,
        bare: bool,
    },
    /// A verdict for another lens: a rejected rung, not a verdict.
    OffLens { answered: String, raw_tail: String },
    /// Garbage, not JSON, prose, a refusal text, a wrong shape: counts as refuse.
    Bad { problem: String, raw_tail: String },
}

/// The verifier's part in a seat (fast-structural on a local model).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = TribunalVerification)]
pub struct Verification {
    /// `pass`, `refuse`, or `none` (no verifier of another family answered).
    pub state: String,
    pub sat: Option<SatOn>,
    pub judged: Option<Judged>,
}

/// One seat of a round.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Seat {
    pub lens: String,
    pub tier: Tier,
    pub charter: String,
    pub state: SeatState,
    pub sat: Option<SatOn>,
    /// Every rung tried, in order, with what happened (the verifier's too).
    pub routing: Vec<Attempt>,
    pub judged: Option<Judged>,
    pub verification: Option<Verification>,
    pub findings: Counts,
    /// Findings of this seat not raised in an earlier round of the same run.
    pub new_findings: u32,
    /// `verdict-<lens>.json` in the round's folder, once written.
    pub verdict_file: Option<String>,
    /// Why the seat is in its state, in a line.
    pub cause: Option<String>,
}

/// A round's state.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RoundState {
    InProgress,
    /// Every seat passed (verified where it must be) and the engine holds.
    UnanimousPass,
    /// At least one seat refused, or the engine refused.
    Refused,
    /// No refusal, but at least one seat held (hold, unverified, rejected).
    Held,
    /// The harness could not judge (baseline not clean green, a timeout, no red commit), or
    /// the round broke: no verdict of this round counts.
    Invalid,
}

impl RoundState {
    pub fn as_str(self) -> &'static str {
        match self {
            RoundState::InProgress => "in_progress",
            RoundState::UnanimousPass => "unanimous_pass",
            RoundState::Refused => "refused",
            RoundState::Held => "held",
            RoundState::Invalid => "invalid",
        }
    }
}

/// How cross-family the grading was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    CrossFamily,
    /// `--solo`: one family available; a fresh context graded blind. Never counts for a gate.
    SameFamilyBlind,
}

/// Whether the loop goes on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Convergence {
    /// `unanimous` (done), `converging` (fix and convene again), `stop` (new findings stable
    /// or rising two rounds in a row: hand it to a person).
    pub state: String,
    /// New findings per round of this run, oldest first, this round last.
    pub trend: Vec<u32>,
    pub cause: String,
}

/// A round: the record the server writes as seats decide, and keeps.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
#[schema(as = TribunalRound)]
pub struct Round {
    pub format: String,
    pub id: String,
    pub candidate: String,
    pub run_ref: String,
    /// 1 for the first round of this run, then 2, …
    pub number: u32,
    /// The candidate identity judged (`candidate-identity-sha256/1`).
    pub identity: crate::evidence::store::DigestRef,
    pub envelope: EnvelopeRef,
    /// As given to `--builder`.
    pub builder: String,
    pub builder_family: String,
    /// Every family refused on every ladder: the builder's, and the family of the tool the
    /// candidate's run was made with (from the run's record), when they differ.
    pub excluded_families: Vec<String>,
    pub mode: Mode,
    /// `graded cross-family` or `graded same-family-blind, not cross-family`.
    pub mode_note: String,
    pub intent: String,
    /// `bytes-sha256/1` of the criteria text (the text is in the envelope).
    pub criteria_sha256: String,
    pub state: RoundState,
    pub started_at: String,
    pub ended_at: Option<String>,
    #[schema(value_type = Object)]
    pub by: Actor,
    /// The folder that holds the round's files (claimed with [`STAMP_FILE`]).
    pub out_dir: String,
    pub seats: Vec<Seat>,
    pub engine: Option<EngineReport>,
    pub findings: Counts,
    pub new_findings: u32,
    /// `null` while in progress.
    pub convergence: Option<Convergence>,
    /// Why the round is in its state, one line each.
    pub causes: Vec<String>,
}

impl Round {
    /// Unanimous on these bytes, cross-family: what a gate may require.
    pub fn counts_for_gate(&self) -> bool {
        self.state == RoundState::UnanimousPass && self.mode == Mode::CrossFamily
    }
}

/// A fake juror's scripted behaviour (the fleet on loopback and the CLI stand-ins), chosen by
/// model name: `fake-pass`, `fake-pass-bare`, `fake-refuse`, `fake-blocker` (a pass listing
/// a blocker), `fake-wrong-lens`, `fake-garbage`, `fake-refusal-text`, `fake-silent` (never
/// answers: the connection is held until the caller's deadline), `fake-slow-<ms>` (a pass
/// after that long), `fake-ctx-<tokens>` (a pass, with that maximum context),
/// `fake-reasoner` (spends its whole budget thinking and emits nothing, `finish_reason:
/// length`, unless reasoning is off). Anything after a `@` is ignored (`fake-pass@b` is a
/// second model with the same behaviour).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    Pass,
    PassBare,
    Refuse,
    PassWithBlocker,
    WrongLens,
    Garbage,
    RefusalText,
    Silent,
    Slow(u64),
    Context(u64),
    Reasoner,
}

impl Behaviour {
    pub fn from_model(model: &str) -> Option<Behaviour> {
        let name = model.split('@').next().unwrap_or("");
        let rest = name.strip_prefix("fake-")?;
        Some(match rest {
            "pass" => Behaviour::Pass,
            "pass-bare" => Behaviour::PassBare,
            "refuse" => Behaviour::Refuse,
            "blocker" => Behaviour::PassWithBlocker,
            "wrong-lens" => Behaviour::WrongLens,
            "garbage" => Behaviour::Garbage,
            "refusal-text" => Behaviour::RefusalText,
            "silent" => Behaviour::Silent,
            "reasoner" => Behaviour::Reasoner,
            _ => {
                if let Some(ms) = rest.strip_prefix("slow-") {
                    Behaviour::Slow(ms.parse().ok()?)
                } else if let Some(t) = rest.strip_prefix("ctx-") {
                    Behaviour::Context(t.parse().ok()?)
                } else {
                    return None;
                }
            }
        })
    }

    /// The text a fake answers for `lens` (the lens read from the prompt's foot), or `None`
    /// when it says nothing (silent, a reasoner whose budget went to thinking).
    pub fn answer(self, lens: &str, reasoning_off: bool) -> Option<String> {
        let v = |verdict: &str, findings: serde_json::Value| {
            serde_json::json!({"verdict": verdict, "lens": lens, "findings": findings}).to_string()
        };
        let checked = serde_json::json!([{"severity": "info",
            "claim": "read every file of the envelope against the criteria",
            "evidence": "the criteria's cases each have a test in the envelope"}]);
        Some(match self {
            Behaviour::Pass | Behaviour::Slow(_) | Behaviour::Context(_) => v("pass", checked),
            Behaviour::PassBare => v("pass", serde_json::json!([])),
            Behaviour::Refuse => v(
                "refuse",
                serde_json::json!([{"severity": "major",
                    "claim": "an error path returns success",
                    "evidence": "the envelope's first changed file returns Ok after a failed write"},
                    {"severity": "minor", "claim": "a message does not name the remedy",
                    "evidence": "the error text in the first changed file"}]),
            ),
            Behaviour::PassWithBlocker => v(
                "pass",
                serde_json::json!([{"severity": "blocker",
                    "claim": "the new test does not assert the effect",
                    "evidence": "the test file's only assertion is on a constant"}]),
            ),
            Behaviour::WrongLens => {
                let other = if lens == "generalist" {
                    "defect"
                } else {
                    "generalist"
                };
                serde_json::json!({"verdict": "pass", "lens": other, "findings": checked})
                    .to_string()
            }
            Behaviour::Garbage => "{\"verdict\": pa".to_string(),
            Behaviour::RefusalText => {
                "I'm sorry, but I can't help with reviewing this.".to_string()
            }
            Behaviour::Silent => return None,
            Behaviour::Reasoner if !reasoning_off => return None,
            Behaviour::Reasoner => v("pass", checked),
        })
    }
}
