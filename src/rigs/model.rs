//! The rigs' data, shared with the wire (`api::rigs` re-exports it): a rig's record and view,
//! its boundary, its lock, the actions that reach it through the one chokepoint
//! ([`crate::rigs::Rigs::act`]), their results, and the audit log's events.

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::auth::Actor;
use crate::runs::TermSize;

/// What a rig is. Only terminal rigs exist (browser, desktop and mobile rigs are out of
/// scope; `docs/rigs.md`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    #[default]
    Terminal,
}

/// The engine behind a rig.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum BackendKind {
    /// QEMU `microvm`: its own kernel, disk and network stack.
    #[default]
    Vm,
    /// bubblewrap: user, pid, mount and network namespaces on the host's kernel.
    Namespace,
}

impl BackendKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Vm => "vm",
            BackendKind::Namespace => "namespace",
        }
    }
}

/// How a VM's CPU is virtualised (probed: KVM only when a test guest booted on it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Accel {
    Kvm,
    Tcg,
}

/// What a rig's boundary is and what it does not prove, as measured at launch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Boundary {
    pub backend: BackendKind,
    /// One line a person reads: `vm boundary: own kernel, disk and network stack (QEMU
    /// microvm, TCG)` or `namespace boundary: weaker than a VM (shares the host kernel)`.
    pub summary: String,
    pub shares_host_kernel: bool,
    /// The VM's accelerator; `null` for a namespace rig.
    pub accel: Option<Accel>,
    /// `denied` (only `lo`) or `allowlist` (only the launch's allowed services).
    pub egress: Egress,
    /// What this boundary does not prove, one line each (printed by `rig show`).
    pub residuals: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Egress {
    Denied,
    Allowlist,
}

/// A host service the launch admitted (`--allow HOST:PORT`), and where the guest reaches it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Allow {
    /// A host name or an IP address, as the operator wrote it.
    pub host: String,
    pub port: u16,
    /// The guest-side address that leads to it through the host-controlled channel
    /// (`10.0.2.100:8080` in a VM, `127.0.0.2:8080` in a namespace); a host name also
    /// resolves to it in the guest's `/etc/hosts`. Empty until the rig has launched.
    #[serde(default)]
    pub guest: String,
}

impl Allow {
    /// Parses `HOST:PORT` (`[v6]:PORT` for an IPv6 literal). The error names the remedy.
    pub fn parse(s: &str) -> Result<Allow, String> {
        let bad = || format!("--allow {s:?}: expected HOST:PORT, for example 127.0.0.1:8080");
        let (host, port) = if let Some(rest) = s.strip_prefix('[') {
            let (h, p) = rest.split_once("]:").ok_or_else(bad)?;
            (h.to_string(), p)
        } else {
            let (h, p) = s.rsplit_once(':').ok_or_else(bad)?;
            (h.to_string(), p)
        };
        let port: u16 = port.parse().map_err(|_| bad())?;
        let host_ok = !host.is_empty()
            && host.len() <= 253
            && host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':' | '_'));
        if port == 0 || !host_ok {
            return Err(bad());
        }
        Ok(Allow {
            host,
            port,
            guest: String::new(),
        })
    }
}

/// A rig's life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum RigState {
    Booting,
    Running,
    Suspended,
    Closing,
    Closed,
}

impl RigState {
    pub fn as_str(self) -> &'static str {
        match self {
            RigState::Booting => "booting",
            RigState::Running => "running",
            RigState::Suspended => "suspended",
            RigState::Closing => "closing",
            RigState::Closed => "closed",
        }
    }
    pub fn is_open(self) -> bool {
        !matches!(self, RigState::Closed)
    }
}

/// Why a rig closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum CloseReason {
    /// `rig close` (who: in the ledger and the audit).
    Requested,
    /// The hard TTL ran out.
    TtlExpired,
    /// Idle for twice the idle window.
    Idle,
    /// Evicted to keep the memory budget (least recently used first).
    MemoryBudget,
    /// The server stopped.
    ServerStop,
    /// Left by a server that died; ended by the next server's sweep.
    OrphanSwept,
    /// The guest or its engine ended on its own, or never booted.
    Failed,
}

/// A person's exclusive control of a rig.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Lock {
    #[schema(value_type = Object)]
    pub holder: Actor,
    /// RFC 3339.
    pub since: String,
}

/// The image a rig booted from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ImageRef {
    /// `sha256:<hex>` of the base image file (`base.img`).
    pub digest: String,
    /// The recipe's id (`debian-bookworm-minbase/1`).
    pub recipe: String,
}

/// A rig's stored record (`data/rigs/<id>/rig.json`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RigRecord {
    /// `rig-0001`.
    pub id: String,
    pub kind: Kind,
    pub backend: BackendKind,
    /// `null` until the launch measured it.
    pub boundary: Option<Boundary>,
    pub state: RigState,
    #[schema(value_type = Object)]
    pub opened_by: Actor,
    pub opened_at: String,
    /// The hard TTL in seconds, fixed at open; nothing extends it.
    pub ttl_secs: u64,
    /// `opened_at + ttl`.
    pub expires_at: String,
    /// Suspended after this long unused, closed after twice it.
    pub idle_secs: u64,
    pub last_used_at: String,
    pub allow: Vec<Allow>,
    /// The registered workspace copied in at open, if any.
    pub workspace: Option<String>,
    pub image: Option<ImageRef>,
    /// What the memory budget charges this rig at least (VM: its RAM; namespace: a floor).
    pub reserved_mb: u64,
    /// The engine's pid on the host and its start time (the orphan sweep checks both).
    pub pid: Option<u32>,
    pub pid_start: Option<u64>,
    pub closed_at: Option<String>,
    pub close_reason: Option<CloseReason>,
    /// One line: what failed, when `state` is closed by `failed`.
    pub error: Option<String>,
}

/// A rig as the API shows it: the record plus what is live now.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RigView {
    #[serde(flatten)]
    pub record: RigRecord,
    #[schema(required = true)]
    pub lock: Option<Lock>,
    /// Seconds until the TTL closes it (0 once closed).
    pub ttl_left_secs: u64,
    pub idle_secs_now: u64,
    /// Resident memory of its engine's processes now, in bytes; `null` when unknown
    /// (closed, or not measurable).
    #[schema(required = true)]
    pub resident_bytes: Option<u64>,
    /// Attached terminals and watchers now (each counts as use).
    pub watchers: u32,
    /// Next seq of its audit log.
    pub audit_next: u64,
}

/// `POST /v1/m/rigs`: open a rig.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct OpenRequest {
    #[serde(default)]
    pub kind: Kind,
    /// Default `vm`.
    #[serde(default)]
    pub backend: Option<BackendKind>,
    /// A registered workspace's name or path: its tree is copied in at `/work`.
    #[serde(default)]
    pub workspace: Option<String>,
    /// `2h`, `30m`, `90s`; default `2h`, at most `24h`.
    #[serde(default)]
    pub ttl: Option<String>,
    /// The idle window (`30m` default): suspended after it, closed after twice it.
    #[serde(default)]
    pub idle: Option<String>,
    /// `HOST:PORT` each.
    #[serde(default)]
    pub allow: Vec<String>,
    /// The console's size (default 24×80).
    #[serde(default)]
    pub rows: Option<u16>,
    #[serde(default)]
    pub cols: Option<u16>,
}

/// `POST /{rig}/exec`: run a program in the guest, without a shell unless argv names one.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ExecRequest {
    pub argv: Vec<String>,
    /// Standard input, base64.
    #[serde(default)]
    pub stdin_b64: Option<String>,
    /// The guest folder it runs in (default `/work` when a workspace was copied in, else
    /// `/root`).
    #[serde(default)]
    pub cwd: Option<String>,
    /// Seconds, default 60, at most 3600; killed at the deadline.
    #[serde(default)]
    pub timeout_secs: Option<u64>,
}

/// What an exec returned. Untrusted: it comes from the guest.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ExecResult {
    #[schema(required = true)]
    pub exit_code: Option<i32>,
    #[schema(required = true)]
    pub signal: Option<String>,
    pub timed_out: bool,
    /// Base64 of at most [`EXEC_OUTPUT_MAX`] bytes each.
    pub stdout_b64: String,
    pub stderr_b64: String,
    /// Output beyond the cap was dropped.
    pub truncated: bool,
}

/// The cap on each of an exec's output streams.
pub const EXEC_OUTPUT_MAX: usize = 4 << 20;
/// The cap on one file copied in or out.
pub const FILE_MAX: usize = 16 << 20;

/// `POST /{rig}/input`: keys or a paste typed into the guest's terminal.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct TypeRequest {
    /// Text typed as is (`\r` is Enter).
    #[serde(default)]
    pub text: Option<String>,
    /// Raw bytes, base64 (either this or `text`).
    #[serde(default)]
    pub data_b64: Option<String>,
    /// A paste: the audit records that it happened and its size, never its content.
    #[serde(default)]
    pub paste: bool,
}

/// `rig fetch`: the guest repository's commits, into `refs/rigs/<id>/*` of the host's.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct FetchReport {
    /// The host repository fetched into.
    pub repository: String,
    /// `refs/rigs/rig-0001/heads/main` → commit, each.
    pub refs: Vec<FetchedRef>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct FetchedRef {
    pub name: String,
    pub commit: String,
}

/// Every action on a rig, observation included: all go through [`crate::rigs::Rigs::act`].
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    Exec(ExecRequest),
    Type(TypeRequest),
    Resize(TermSize),
    /// `rig cp HOST RIG:PATH`.
    PutFile {
        path: String,
        bytes: Vec<u8>,
        mode: u32,
    },
    /// `rig cp RIG:PATH HOST` (observation).
    GetFile {
        path: String,
    },
    /// What the guest's terminal shows (observation).
    Screen,
    Lock,
    Unlock,
    Suspend,
    Resume,
    Close,
    Fetch,
}

impl Action {
    /// The action's name in the audit log and in refusals.
    pub fn name(&self) -> &'static str {
        match self {
            Action::Exec(_) => "exec",
            Action::Type(_) => "type",
            Action::Resize(_) => "resize",
            Action::PutFile { .. } => "cp-in",
            Action::GetFile { .. } => "cp-out",
            Action::Screen => "screen",
            Action::Lock => "lock",
            Action::Unlock => "unlock",
            Action::Suspend => "suspend",
            Action::Resume => "resume",
            Action::Close => "close",
            Action::Fetch => "fetch",
        }
    }

    /// Changes the guest or the rig: refused to an agent while a person holds the lock.
    /// Observation (`screen`, `cp-out`) is not.
    pub fn is_mutating(&self) -> bool {
        !matches!(self, Action::Screen | Action::GetFile { .. })
    }

    /// An input event: recorded in the rig's audit log.
    pub fn is_input(&self) -> bool {
        matches!(
            self,
            Action::Exec(_) | Action::Type(_) | Action::PutFile { .. } | Action::Resize(_)
        )
    }
}

/// What an action returned.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    Exec(ExecResult),
    File(Vec<u8>),
    Screen(crate::runs::ScreenSnapshot),
    Fetched(FetchReport),
    /// The rig after the action.
    Rig(Box<RigView>),
}

/// One line of a rig's audit log (`data/rigs/<id>/audit.jsonl`), kept after the rig closes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AuditEvent {
    /// Monotonic per rig, from 1, no gaps.
    pub seq: u64,
    pub at: String,
    #[schema(value_type = Object)]
    pub by: Actor,
    /// The action's name ([`Action::name`]), or `attach` / `detach`.
    pub action: String,
    /// `done`, `refused` or `failed`.
    pub outcome: String,
    /// Sizes and names, never a paste's or a file's content: `{"bytes": 12, "paste": true}`,
    /// `{"argv": ["ls", "-la"]}`, `{"path": "/work/x", "bytes": 4096}`.
    #[schema(value_type = Object)]
    pub detail: serde_json::Value,
}

/// `GET /{rig}/audit?after=&limit=`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct AuditPage {
    pub rig: String,
    pub events: Vec<AuditEvent>,
    /// The seq the next event will have.
    pub next: u64,
}

/// The settings of `config/rigs.toml` (all optional; the defaults are these).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// Resident megabytes across every open rig (default 4096).
    pub memory_budget_mb: u64,
    /// A VM's RAM in MiB (default 256).
    pub vm_memory_mb: u64,
    /// What a namespace rig is charged at least (default 32).
    pub namespace_floor_mb: u64,
    /// Default TTL (`2h`) and idle window (`30m`).
    pub ttl: String,
    pub idle: String,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            memory_budget_mb: 4096,
            vm_memory_mb: 256,
            namespace_floor_mb: 32,
            ttl: "2h".into(),
            idle: "30m".into(),
        }
    }
}

/// The longest TTL a rig may have.
pub const TTL_MAX_SECS: u64 = 24 * 3600;

/// Parses a duration of the wire and of `config/rigs.toml`: one or more `<number><unit>`
/// with units `s`, `m`, `h` (`90s`, `30m`, `2h`, `1h30m`), at least 1 second. The error
/// names the value and the expected form.
pub fn parse_duration(s: &str) -> Result<u64, String> {
    let bad = || format!("{s:?} is not a duration: expected for example 90s, 30m, 2h or 1h30m");
    let t = s.trim();
    if t.is_empty() {
        return Err(bad());
    }
    let mut total: u64 = 0;
    let mut num = String::new();
    for c in t.chars() {
        if c.is_ascii_digit() {
            num.push(c);
            continue;
        }
        let unit = match c {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            _ => return Err(bad()),
        };
        if num.is_empty() {
            return Err(bad());
        }
        let n: u64 = num.parse().map_err(|_| bad())?;
        num.clear();
        total = n
            .checked_mul(unit)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(bad)?;
    }
    if !num.is_empty() {
        return Err(bad());
    }
    if total == 0 {
        return Err(format!("{s:?}: a duration is at least 1s"));
    }
    Ok(total)
}

#[cfg(test)]
mod duration_tests {
    use super::parse_duration;

    #[test]
    fn the_forms_of_the_wire_parse() {
        assert_eq!(parse_duration("90s"), Ok(90));
        assert_eq!(parse_duration("30m"), Ok(1800));
        assert_eq!(parse_duration("2h"), Ok(7200));
        assert_eq!(parse_duration("1h30m"), Ok(5400));
        assert_eq!(parse_duration("1h0m5s"), Ok(3605));
        assert_eq!(parse_duration("4s"), Ok(4));
    }

    #[test]
    fn bad_forms_are_refused_naming_the_value() {
        for bad in [
            "",
            "90",
            "s",
            "1x",
            "-1s",
            "1.5h",
            "0s",
            "h1",
            "99999999999999999999h",
        ] {
            let e = parse_duration(bad).unwrap_err();
            assert!(e.contains(&format!("{bad:?}")), "{bad}: {e}");
        }
    }
}
