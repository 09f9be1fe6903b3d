//! Workspaces: the folders an operator registered, each with the texts a person approves by
//! SHA-256 before they apply (the setup command, the check policy) and the approval of the
//! agent configuration the folder carries ([`project_config`]).
//!
//! The registry is `data/workspaces.json` (0600, replaced atomically). Only the server
//! mutates it, through its one [`Store`] (held in the server's state, one per home: the
//! mutex every mutation takes and the events a failed write left pending); anyone may read
//! the file ([`load`], [`find`]).
//!
//! Every mutation is an event: it is validated against the registry, appended to the ledger
//! (fsync'd), then applied to the registry, whose file records the seq of the last event it
//! holds (`applied_seq`). The ledger comes first, so a crash never leaves an approval without
//! its audit entry; a crash between the two leaves an entry the registry lacks, and
//! [`recover`] (run when the server starts) replays every `sessions.workspace.*` event past
//! `applied_seq`. Until then the approval is simply not in force: the failure is closed.
//! (The store itself sees the events it appended and could not write yet; readers of the
//! file, such as admission and the evidence checks, do not: for them too the failure is
//! closed.)
//!
//! Nothing here executes the setup command, the policy or any file of the folder.

pub mod policy;
pub mod project_config;

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use sha2::{Digest, Sha256};

use crate::files::{self, FilesError};
use crate::home::Home;
use crate::ledger::{Ledger, LedgerError};
use crate::providers::Tool;
use crate::text;

/// The format name of the registry file.
pub const FORMAT: &str = "proctor-workspaces/1";
/// The recipe of `setup_command_sha256`: SHA-256 of the exact UTF-8 bytes of the command.
pub const SETUP_DIGEST_RECIPE: &str = "setup-command-sha256/1";
/// The largest setup command accepted, in bytes.
pub const MAX_SETUP_BYTES: usize = 8192;

/// Ledger kinds. (A ledger kind is `[a-z0-9_]` segments, so seed 002's
/// `approve-setup` is written `approve_setup`.)
pub mod kinds {
    pub const ADDED: &str = "sessions.workspace.added";
    pub const SETUP_SET: &str = "sessions.workspace.setup_set";
    pub const APPROVE_SETUP: &str = "sessions.workspace.approve_setup";
    pub const POLICY_SET: &str = "sessions.workspace.policy_set";
    pub const APPROVE_POLICY: &str = "sessions.workspace.approve_policy";
    pub const APPROVE_PROJECT_CONFIG: &str = "sessions.workspace.approve_project_config";
    /// The common prefix, for replay.
    pub const PREFIX: &str = "sessions.workspace.";
}

#[derive(Debug, thiserror::Error)]
pub enum WorkspaceError {
    #[error(transparent)]
    Files(#[from] FilesError),
    #[error(transparent)]
    Ledger(#[from] LedgerError),
    #[error("{path} is not a workspace registry ({FORMAT}): {err}")]
    Corrupt { path: PathBuf, err: String },
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    #[error("{0}")]
    Unprocessable(String),
    #[error("{0}")]
    BadRequest(String),
    #[error("{0}")]
    AgentRefused(String),
    #[error("{0}")]
    Internal(String),
}

/// Who approved which hash, when.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, utoipa::ToSchema)]
pub struct Approval {
    /// Lowercase hex SHA-256 of what was approved.
    pub sha256: String,
    /// The approving token: `name (tok-…)`.
    pub actor: String,
    /// RFC 3339 UTC, milliseconds.
    pub at: String,
    /// For a project-config approval given for a commit's files (`--from`): that full
    /// commit id (`null` otherwise). The approval applies by hash alone, wherever the same
    /// files are.
    #[serde(default)]
    pub from: Option<String>,
}

/// A text stored in proctor that applies only while a person's approval covers it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Approvable {
    /// The exact text ("" when none is set).
    #[serde(default)]
    pub text: String,
    /// The last approval, kept as evidence after the text changes.
    #[serde(default)]
    pub approval: Option<Approval>,
}

/// Lowercase hex SHA-256 of bytes.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

impl Approvable {
    /// Lowercase hex SHA-256 of the exact UTF-8 bytes of the text.
    pub fn sha256(&self) -> String {
        sha256_hex(self.text.as_bytes())
    }

    /// True when there is nothing to approve (empty text), or when the last approval's hash
    /// equals the current text's: returning to an approved text applies that approval again.
    pub fn approved(&self) -> bool {
        self.text.is_empty()
            || self
                .approval
                .as_ref()
                .is_some_and(|a| a.sha256 == self.sha256())
    }
}

/// One registered folder.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Workspace {
    /// `ws-0001`.
    pub ws_ref: String,
    /// The canonical absolute path.
    pub path: PathBuf,
    pub created_at: String,
    /// The setup command (seed 002, "Approuver la commande de préparation d'un dossier").
    #[serde(default)]
    pub setup: Approvable,
    /// The check policy text (`crate::evidence::policy`).
    #[serde(default)]
    pub policy: Approvable,
    /// The last approval of the folder's flagged agent configuration ([`project_config`]).
    #[serde(default)]
    pub project_config_approval: Option<Approval>,
}

/// The registry file.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct Registry {
    format: String,
    /// The seq of the last ledger event applied.
    applied_seq: u64,
    /// The number of the next ref; refs are never reused.
    next_number: u64,
    workspaces: Vec<Workspace>,
}

/// The registry's path.
pub fn registry_path(home: &Home) -> PathBuf {
    home.data.join("workspaces.json")
}

fn now() -> String {
    crate::ledger::now_at()
}

// ---------------------------------------------------------------------------------------------
// The registry: read, events, apply
// ---------------------------------------------------------------------------------------------

/// Events appended to the ledger but not yet in the registry file (a write failed after the
/// append). Guarded by the one mutex every mutation takes.
#[derive(Debug, Default)]
struct Pending {
    /// (seq, change).
    events: Vec<(u64, Change)>,
}

/// The workspace registry of one home as its server holds it: the one mutex every mutation
/// takes, and the events appended to the ledger that a failed write left out of the file.
/// The server owns one (in its state) and hands it to the handlers; nothing process-wide, so
/// two servers for two homes in one process never see or block each other's.
#[derive(Debug)]
pub struct Store {
    home: Home,
    pending: Mutex<Pending>,
}

fn read_registry(home: &Home) -> Result<Registry, WorkspaceError> {
    let path = registry_path(home);
    let file = match files::open_private_read(&path) {
        Ok(f) => f,
        Err(FilesError::Io { err, .. }) if err.kind() == std::io::ErrorKind::NotFound => {
            return Ok(Registry {
                format: FORMAT.into(),
                applied_seq: 0,
                next_number: 1,
                workspaces: Vec::new(),
            });
        }
        Err(e) => return Err(e.into()),
    };
    let reg: Registry = serde_json::from_reader(std::io::BufReader::new(file)).map_err(|e| {
        WorkspaceError::Corrupt {
            path: path.clone(),
            err: e.to_string(),
        }
    })?;
    if reg.format != FORMAT {
        return Err(WorkspaceError::Corrupt {
            path,
            err: format!("format {:?}", reg.format),
        });
    }
    Ok(reg)
}

fn write_registry(home: &Home, reg: &Registry) -> Result<(), WorkspaceError> {
    files::ensure_private_dir(&home.data)?;
    let mut bytes = serde_json::to_vec_pretty(reg)
        .map_err(|e| WorkspaceError::Internal(format!("cannot encode the registry: {e}")))?;
    bytes.push(b'\n');
    files::write_atomic(&registry_path(home), &bytes)?;
    Ok(())
}

/// One state change, as recorded in the ledger.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Change {
    Added {
        ws: String,
        path: String,
        at: String,
    },
    SetupSet {
        ws: String,
        text: String,
    },
    PolicySet {
        ws: String,
        text: String,
    },
    Approved {
        what: Subject,
        ws: String,
        approval: Approval,
        extra: Map<String, Value>,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Subject {
    Setup,
    Policy,
    ProjectConfig,
}

impl Change {
    fn kind(&self) -> &'static str {
        match self {
            Change::Added { .. } => kinds::ADDED,
            Change::SetupSet { .. } => kinds::SETUP_SET,
            Change::PolicySet { .. } => kinds::POLICY_SET,
            Change::Approved { what, .. } => match what {
                Subject::Setup => kinds::APPROVE_SETUP,
                Subject::Policy => kinds::APPROVE_POLICY,
                Subject::ProjectConfig => kinds::APPROVE_PROJECT_CONFIG,
            },
        }
    }

    fn fields(&self, by: &str) -> Map<String, Value> {
        let v = match self {
            Change::Added { ws, path, at } => {
                json!({"workspace": ws, "path": path, "created_at": at, "by": by})
            }
            Change::SetupSet { ws, text } => json!({
                "workspace": ws, "command": text, "sha256": sha256_hex(text.as_bytes()),
                "recipe": SETUP_DIGEST_RECIPE, "by": by,
            }),
            Change::PolicySet { ws, text } => json!({
                "workspace": ws, "policy": text, "sha256": sha256_hex(text.as_bytes()),
                "recipe": policy::POLICY_DIGEST_RECIPE, "by": by,
            }),
            Change::Approved {
                ws,
                approval,
                extra,
                ..
            } => {
                let mut m = extra.clone();
                m.insert("workspace".into(), json!(ws));
                m.insert("sha256".into(), json!(approval.sha256));
                m.insert("actor".into(), json!(approval.actor));
                m.insert("approved_at".into(), json!(approval.at));
                m.insert("by".into(), json!(by));
                Value::Object(m)
            }
        };
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    /// The change a ledger event records, if it is one of ours.
    fn from_event(kind: &str, v: &Value) -> Option<Change> {
        let s = |k: &str| v[k].as_str().map(str::to_string);
        let ws = s("workspace")?;
        let approval = || -> Option<Approval> {
            Some(Approval {
                sha256: s("sha256")?,
                actor: s("actor")?,
                at: s("approved_at")?,
                from: s("from"),
            })
        };
        Some(match kind {
            kinds::ADDED => Change::Added {
                ws,
                path: s("path")?,
                at: s("created_at")?,
            },
            kinds::SETUP_SET => Change::SetupSet {
                ws,
                text: s("command")?,
            },
            kinds::POLICY_SET => Change::PolicySet {
                ws,
                text: s("policy")?,
            },
            kinds::APPROVE_SETUP => Change::Approved {
                what: Subject::Setup,
                ws,
                approval: approval()?,
                extra: Map::new(),
            },
            kinds::APPROVE_POLICY => Change::Approved {
                what: Subject::Policy,
                ws,
                approval: approval()?,
                extra: Map::new(),
            },
            kinds::APPROVE_PROJECT_CONFIG => Change::Approved {
                what: Subject::ProjectConfig,
                ws,
                approval: approval()?,
                extra: Map::new(),
            },
            _ => return None,
        })
    }

    fn apply(&self, reg: &mut Registry) {
        match self {
            Change::Added { ws, path, at } => {
                if reg.workspaces.iter().any(|w| &w.ws_ref == ws) {
                    return;
                }
                if let Some(n) = parse_ref(ws) {
                    reg.next_number = reg.next_number.max(n + 1);
                }
                reg.workspaces.push(Workspace {
                    ws_ref: ws.clone(),
                    path: PathBuf::from(path),
                    created_at: at.clone(),
                    setup: Approvable::default(),
                    policy: Approvable::default(),
                    project_config_approval: None,
                });
            }
            Change::SetupSet { ws, text } => {
                if let Some(w) = reg.workspaces.iter_mut().find(|w| &w.ws_ref == ws) {
                    w.setup.text = text.clone();
                }
            }
            Change::PolicySet { ws, text } => {
                if let Some(w) = reg.workspaces.iter_mut().find(|w| &w.ws_ref == ws) {
                    w.policy.text = text.clone();
                }
            }
            Change::Approved {
                what, ws, approval, ..
            } => {
                if let Some(w) = reg.workspaces.iter_mut().find(|w| &w.ws_ref == ws) {
                    let a = Some(approval.clone());
                    match what {
                        Subject::Setup => w.setup.approval = a,
                        Subject::Policy => w.policy.approval = a,
                        Subject::ProjectConfig => w.project_config_approval = a,
                    }
                }
            }
        }
    }
}

/// Applies the events a failed write left pending (only those the file does not hold yet).
fn with_pending(mut reg: Registry, pending: &Pending) -> Registry {
    for (seq, change) in &pending.events {
        if *seq > reg.applied_seq {
            change.apply(&mut reg);
            reg.applied_seq = *seq;
        }
    }
    reg
}

impl Store {
    /// The store of `home`'s registry (nothing is read until it is used).
    pub fn new(home: &Home) -> Store {
        Store {
            home: home.clone(),
            pending: Mutex::new(Pending::default()),
        }
    }

    /// The home whose registry this is.
    pub fn home(&self) -> &Home {
        &self.home
    }

    fn lock(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Runs `f` while holding this store's lock, as a mutation does (for tests of the
    /// server's state).
    #[cfg(test)]
    pub(crate) fn with_lock<R>(&self, f: impl FnOnce() -> R) -> R {
        let _held = self.lock();
        f()
    }

    /// The registry as this store knows it: the file and the events it could not write yet.
    fn current(&self) -> Result<Registry, WorkspaceError> {
        let pending = self.lock();
        let reg = read_registry(&self.home)?;
        Ok(with_pending(reg, &pending))
    }

    /// Every registered workspace, in registration order (with the events pending).
    pub fn load(&self) -> Result<Vec<Workspace>, WorkspaceError> {
        Ok(self.current()?.workspaces)
    }

    /// A workspace by ref or by absolute path, as [`find`], with the events pending.
    pub fn find(&self, ref_or_path: &str) -> Result<Option<Workspace>, WorkspaceError> {
        Ok(find_in(&self.current()?, ref_or_path))
    }
}

/// Who asks for a change (from the authorizer): the one actor type of [`crate::auth`].
pub use crate::auth::Actor;

/// Refuses an agent: only a person approves `what`.
fn person(actor: &Actor, what: &str) -> Result<(), WorkspaceError> {
    if actor.is_agent() {
        return Err(WorkspaceError::AgentRefused(format!(
            "an agent identity cannot approve {what}; a person approves it with a person's token"
        )));
    }
    Ok(())
}

/// Validates a change against the registry, appends it to the ledger, applies it and
/// writes the registry. Returns the workspace the change is about.
fn mutate(
    store: &Store,
    ledger: &Ledger,
    actor: &Actor,
    decide: impl FnOnce(&Registry) -> Result<(String, Option<Change>), WorkspaceError>,
) -> Result<Workspace, WorkspaceError> {
    let home = &store.home;
    let mut pending = store.lock();
    let mut reg = with_pending(read_registry(home)?, &pending);
    let (ws_ref, change) = decide(&reg)?;
    if let Some(change) = change {
        let seq = ledger.append(change.kind(), &change.fields(&actor.token_id))?;
        change.apply(&mut reg);
        reg.applied_seq = seq;
        pending.events.push((seq, change));
        write_registry(home, &reg)?;
        pending.events.clear();
    }
    find_in(&reg, &ws_ref).ok_or_else(|| WorkspaceError::Internal("the workspace vanished".into()))
}

/// Replays the `sessions.workspace.*` events of the ledger that the registry file does not
/// hold yet (a crash between the ledger append and the registry write). Returns how many
/// were applied. The server calls it once it holds the ledger, before serving.
pub fn recover(store: &Store, ledger_path: &Path) -> Result<usize, WorkspaceError> {
    let home = &store.home;
    let mut pending = store.lock();
    let mut reg = with_pending(read_registry(home)?, &pending);
    let file = match std::fs::File::open(ledger_path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => return Err(FilesError::io("open", ledger_path, e).into()),
    };
    let needle = format!("\"kind\":\"{}", kinds::PREFIX);
    let mut applied = 0;
    for line in std::io::BufReader::new(file).split(b'\n') {
        let line = line.map_err(|e| FilesError::io("read", ledger_path, e))?;
        if !line.windows(needle.len()).any(|w| w == needle.as_bytes()) {
            continue;
        }
        let Ok(v) = serde_json::from_slice::<Value>(&line) else {
            continue;
        };
        let (Some(seq), Some(kind)) = (v["seq"].as_u64(), v["kind"].as_str()) else {
            continue;
        };
        if seq <= reg.applied_seq {
            continue;
        }
        if let Some(change) = Change::from_event(kind, &v) {
            change.apply(&mut reg);
            reg.applied_seq = seq;
            applied += 1;
        }
    }
    if applied > 0 || !pending.events.is_empty() {
        write_registry(home, &reg)?;
    }
    pending.events.clear();
    Ok(applied)
}

// ---------------------------------------------------------------------------------------------
// Reading
// ---------------------------------------------------------------------------------------------

/// Every registered workspace, in registration order, as the registry file holds them.
pub fn load(home: &Home) -> Result<Vec<Workspace>, WorkspaceError> {
    Ok(read_registry(home)?.workspaces)
}

/// The number of a ref: `ws-0001`, `ws-1` → 1.
fn parse_ref(s: &str) -> Option<u64> {
    let d = s.strip_prefix("ws-")?;
    if d.is_empty() || d.len() > 18 || !d.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    d.parse().ok()
}

/// `ws-0001` for `ws-1` or `ws-0001`; None when `s` is not a ref.
pub fn normalise_ref(s: &str) -> Option<String> {
    parse_ref(s).map(|n| format!("ws-{n:04}"))
}

fn find_in(reg: &Registry, ref_or_path: &str) -> Option<Workspace> {
    if let Some(r) = normalise_ref(ref_or_path) {
        return reg.workspaces.iter().find(|w| w.ws_ref == r).cloned();
    }
    let p = Path::new(ref_or_path);
    if !p.is_absolute() {
        return None;
    }
    let canon = std::fs::canonicalize(p).ok();
    reg.workspaces
        .iter()
        .find(|w| w.path == p || canon.as_deref() == Some(w.path.as_path()))
        .cloned()
}

/// A workspace by ref (`ws-0001`, `ws-1`) or by absolute path (compared canonicalized).
/// As the registry file holds it ([`Store::find`] adds the events its server could not
/// write yet).
pub fn find(home: &Home, ref_or_path: &str) -> Result<Option<Workspace>, WorkspaceError> {
    Ok(find_in(&read_registry(home)?, ref_or_path))
}

fn get(reg: &Registry, ws: &str) -> Result<Workspace, WorkspaceError> {
    find_in(reg, ws).ok_or_else(|| not_found(ws))
}

fn not_found(ws: &str) -> WorkspaceError {
    WorkspaceError::NotFound(format!(
        "no workspace {}; `proctor workspace list` shows them",
        text::one_line(ws, 200)
    ))
}

/// The workspace's policy text and its SHA-256 (recipe `policy-text-sha256/1`), only while a
/// person's approval covers the current, non-empty text.
pub fn approved_policy(
    home: &Home,
    ws_ref: &str,
) -> Result<Option<(String, String)>, WorkspaceError> {
    let Some(w) = find(home, ws_ref)? else {
        return Ok(None);
    };
    if w.policy.text.is_empty() || !w.policy.approved() {
        return Ok(None);
    }
    let h = w.policy.sha256();
    Ok(Some((w.policy.text, h)))
}

// ---------------------------------------------------------------------------------------------
// Admission (called by the sessions manager before a start or a resume)
// ---------------------------------------------------------------------------------------------

/// What a start may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Admitted {
    /// The folder: the workspace's canonical path when registered, else the path given.
    pub path: PathBuf,
    /// The workspace's ref when the folder is registered.
    pub workspace_ref: Option<String>,
}

/// Why a start is refused. The message names the problem and the remedy.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdmitError {
    /// 422.
    #[error("{0}")]
    Unprocessable(String),
    /// 409.
    #[error("{0}")]
    Conflict(String),
    /// 500.
    #[error("{0}")]
    Internal(String),
}

impl From<WorkspaceError> for AdmitError {
    fn from(e: WorkspaceError) -> Self {
        match e {
            WorkspaceError::NotFound(m) | WorkspaceError::Unprocessable(m) => {
                AdmitError::Unprocessable(m)
            }
            WorkspaceError::Conflict(m) => AdmitError::Conflict(m),
            other => AdmitError::Internal(other.to_string()),
        }
    }
}

/// Before anything is created: resolves `workspace` (a ref such as `ws-0001`, or an absolute
/// path) and, for a worktree start, requires a registered workspace (422 naming
/// `proctor workspace add`) whose setup command is approved unless `no_setup` (409 naming
/// the command, its sha256 and the approve command).
pub fn admit_start(
    home: &Home,
    workspace: &str,
    worktree: bool,
    no_setup: bool,
) -> Result<Admitted, AdmitError> {
    let reg = read_registry(home)?;
    let found = if normalise_ref(workspace).is_some() {
        Some(find_in(&reg, workspace).ok_or_else(|| {
            AdmitError::Unprocessable(format!(
                "no workspace {}; `proctor workspace list` shows the registered ones",
                text::one_line(workspace, 60)
            ))
        })?)
    } else {
        let p = Path::new(workspace);
        if !p.is_absolute() || !p.is_dir() {
            return Err(AdmitError::Unprocessable(format!(
                "workspace {} is neither a workspace ref (ws-0001) nor an absolute path to an \
                 existing folder",
                text::one_line(workspace, 200)
            )));
        }
        find_in(&reg, workspace)
    };
    let Some(ws) = found else {
        if worktree {
            return Err(AdmitError::Unprocessable(format!(
                "a worktree start needs a registered workspace, and {} is not one. Remedy: \
                 `proctor workspace add {}`, then start with that workspace",
                text::one_line(workspace, 200),
                text::one_line(workspace, 200)
            )));
        }
        return Ok(Admitted {
            path: PathBuf::from(workspace),
            workspace_ref: None,
        });
    };
    if !ws.path.is_dir() {
        return Err(AdmitError::Unprocessable(format!(
            "workspace {} is registered at {}, which is no longer a folder",
            ws.ws_ref,
            text::one_line(&ws.path.to_string_lossy(), 200)
        )));
    }
    if worktree && !no_setup && !ws.setup.approved() {
        return Err(AdmitError::Conflict(setup_refusal(&ws)));
    }
    Ok(Admitted {
        path: ws.path.clone(),
        workspace_ref: Some(ws.ws_ref),
    })
}

fn setup_refusal(ws: &Workspace) -> String {
    let h = ws.setup.sha256();
    let last = match &ws.setup.approval {
        Some(a) => format!(
            " (the last approval, by {} at {}, covers sha256 {}, another text)",
            text::one_line(&a.actor, 80),
            a.at,
            a.sha256
        ),
        None => String::new(),
    };
    format!(
        "the setup command of {} is not approved{last}: {:?} ({SETUP_DIGEST_RECIPE} {h}). \
         Review it with `proctor workspace setup {}`, then approve it with \
         `proctor workspace approve-setup {} --sha256 {h}`; or start with no_setup \
         (`--no-setup`) to skip the setup for this one start",
        ws.ws_ref,
        text::one_line(&ws.setup.text, 400),
        ws.ws_ref,
        ws.ws_ref
    )
}

/// The project-config check for `tool` about to start or resume in `folder` (the workspace
/// itself, or a new worktree of it). Tools that read none of the scanned files, and folders
/// where none of the files `tool` reads is flagged, pass. Otherwise the stored approval of
/// the workspace must equal the current hash of the folder's flagged part (409 naming the
/// files, the hash and the approve command).
pub fn admit_folder(
    home: &Home,
    workspace_ref: Option<&str>,
    tool: Tool,
    folder: &Path,
) -> Result<(), AdmitError> {
    admit(home, workspace_ref, tool, folder, None)
}

/// [`admit_folder`] for a new worktree of the workspace checked out at `commit` (a full
/// commit id): the same check, and a refusal that names the commands reviewing and
/// approving that commit's files (`--from <commit>`), since they can differ from the
/// workspace folder's.
pub fn admit_worktree(
    home: &Home,
    workspace_ref: Option<&str>,
    tool: Tool,
    folder: &Path,
    commit: &str,
) -> Result<(), AdmitError> {
    admit(home, workspace_ref, tool, folder, Some(commit))
}

fn admit(
    home: &Home,
    workspace_ref: Option<&str>,
    tool: Tool,
    folder: &Path,
    from: Option<&str>,
) -> Result<(), AdmitError> {
    let scan = project_config::scan(folder)
        .map_err(|e| AdmitError::Unprocessable(format!("cannot check the folder: {e}")))?;
    let read: Vec<&project_config::FileReport> = scan.flagged_for(tool).collect();
    if read.is_empty() {
        return Ok(());
    }
    let ws = match workspace_ref {
        Some(r) => find(home, r)?,
        None => None,
    };
    if let Some(ws) = &ws
        && ws
            .project_config_approval
            .as_ref()
            .is_some_and(|a| a.sha256 == scan.sha256)
    {
        return Ok(());
    }
    let names: Vec<String> = read
        .iter()
        .map(|f| {
            let what = match &f.unreadable {
                Some(u) => format!("unreadable: {}", u.reason),
                None => f
                    .keys
                    .iter()
                    .map(|k| k.key.clone())
                    .collect::<Vec<_>>()
                    .join(", "),
            };
            format!("{} ({})", f.path, text::one_line(&what, 300))
        })
        .collect();
    let folder_s = text::one_line(&folder.to_string_lossy(), 200);
    let remedy = match &ws {
        Some(ws) => {
            let last = match &ws.project_config_approval {
                Some(a) => format!(
                    "; the last approval ({} at {}) covers sha256 {}",
                    text::one_line(&a.actor, 80),
                    a.at,
                    a.sha256
                ),
                None => "; it was never approved".into(),
            };
            let r = &ws.ws_ref;
            let h = &scan.sha256;
            match from {
                Some(c) => {
                    let c = text::one_line(c, 64);
                    format!(
                        "{last}. The worktree was checked out at commit {c}: review the files \
                         committed there with `proctor workspace project-config {r} --from \
                         {c}`, then approve them with `proctor workspace \
                         approve-project-config {r} --from {c} --sha256 {h}`"
                    )
                }
                None => format!(
                    "{last}. Review it with `proctor workspace project-config {r}`, then \
                     approve it with `proctor workspace approve-project-config {r} --sha256 \
                     {h}`"
                ),
            }
        }
        None => format!(
            ". Register the folder with `proctor workspace add {folder_s}`, review it with \
             `proctor workspace project-config <ws>` and approve it with \
             `proctor workspace approve-project-config <ws> --sha256 {}`",
            scan.sha256
        ),
    };
    Err(AdmitError::Conflict(format!(
        "{} reads agent configuration in {folder_s} that can run programs or redirect \
         traffic: {}. Its flagged part has {} {}{remedy}",
        tool.name(),
        names.join("; "),
        project_config::RECIPE,
        scan.sha256
    )))
}

// ---------------------------------------------------------------------------------------------
// Changes (server only)
// ---------------------------------------------------------------------------------------------

/// Registers a folder: an absolute path to an existing folder, stored canonicalized.
/// 409 when it is already registered (under any spelling).
pub fn add(
    store: &Store,
    ledger: &Ledger,
    actor: &Actor,
    path: &str,
) -> Result<Workspace, WorkspaceError> {
    let p = Path::new(path);
    if !p.is_absolute() {
        return Err(WorkspaceError::Unprocessable(format!(
            "{} is not an absolute path; give the folder's full path",
            text::one_line(path, 200)
        )));
    }
    let canon = std::fs::canonicalize(p).map_err(|e| {
        WorkspaceError::Unprocessable(format!("{}: {e}", text::one_line(path, 200)))
    })?;
    if !canon.is_dir() {
        return Err(WorkspaceError::Unprocessable(format!(
            "{} is not a folder",
            text::one_line(path, 200)
        )));
    }
    let canon_s = canon
        .to_str()
        .ok_or_else(|| {
            WorkspaceError::Unprocessable(format!(
                "{} is not valid UTF-8; the API carries paths as JSON strings",
                text::one_line(&canon.to_string_lossy(), 200)
            ))
        })?
        .to_string();
    mutate(store, ledger, actor, |reg| {
        if let Some(w) = reg.workspaces.iter().find(|w| w.path == canon) {
            return Err(WorkspaceError::Conflict(format!(
                "{} is already registered as {}",
                text::one_line(canon_s.as_str(), 200),
                w.ws_ref
            )));
        }
        let new_ref = format!("ws-{:04}", reg.next_number.max(1));
        let change = Change::Added {
            ws: new_ref.clone(),
            path: canon_s.clone(),
            at: now(),
        };
        Ok((new_ref, Some(change)))
    })
}

fn check_setup_text(command: &str) -> Result<(), WorkspaceError> {
    if command.len() > MAX_SETUP_BYTES {
        return Err(WorkspaceError::Unprocessable(format!(
            "the setup command is {} bytes; at most {MAX_SETUP_BYTES} are accepted",
            command.len()
        )));
    }
    if command.contains('\0') {
        return Err(WorkspaceError::Unprocessable(
            "the setup command contains a NUL byte".into(),
        ));
    }
    Ok(())
}

/// Sets (or, with "", clears) the setup command: the exact text, spaces included.
/// Setting the text it already has changes and records nothing.
pub fn set_setup(
    store: &Store,
    ledger: &Ledger,
    actor: &Actor,
    ws: &str,
    command: &str,
) -> Result<Workspace, WorkspaceError> {
    check_setup_text(command)?;
    mutate(store, ledger, actor, |reg| {
        let w = get(reg, ws)?;
        if w.setup.text == command {
            return Ok((w.ws_ref, None));
        }
        let change = Change::SetupSet {
            ws: w.ws_ref.clone(),
            text: command.to_string(),
        };
        Ok((w.ws_ref, Some(change)))
    })
}

fn check_hash(h: &str) -> Result<String, WorkspaceError> {
    let h = h.trim().to_ascii_lowercase();
    if h.len() != 64 || !h.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(WorkspaceError::BadRequest(format!(
            "sha256 {} is not 64 hexadecimal digits",
            text::one_line(&h, 80)
        )));
    }
    Ok(h)
}

fn approve_text(
    store: &Store,
    ledger: &Ledger,
    actor: &Actor,
    ws: &str,
    sha256: &str,
    what: Subject,
) -> Result<Workspace, WorkspaceError> {
    let (label, verb) = match what {
        Subject::Setup => ("the setup command", "setup"),
        _ => ("the check policy", "policy"),
    };
    person(actor, label)?;
    let h = check_hash(sha256)?;
    mutate(store, ledger, actor, |reg| {
        let w = get(reg, ws)?;
        let item = match what {
            Subject::Setup => &w.setup,
            _ => &w.policy,
        };
        if item.text.is_empty() {
            return Err(WorkspaceError::Unprocessable(format!(
                "{} has no {label} to approve; set one with `proctor workspace {verb} {}`",
                w.ws_ref, w.ws_ref
            )));
        }
        let cur = item.sha256();
        if cur != h {
            return Err(WorkspaceError::Conflict(format!(
                "{label} of {} has sha256 {cur}, not {h}: it changed since it was \
                     reviewed. Review it again with `proctor workspace {verb} {}`",
                w.ws_ref, w.ws_ref
            )));
        }
        let change = Change::Approved {
            what,
            ws: w.ws_ref.clone(),
            approval: Approval {
                sha256: h.clone(),
                actor: actor.label(),
                at: now(),
                from: None,
            },
            extra: Map::new(),
        };
        Ok((w.ws_ref, Some(change)))
    })
}

/// Approves the setup command whose SHA-256 the person reviewed: admin (checked by the
/// route), a person (agents refused), and 409 when the stored text's hash differs.
pub fn approve_setup(
    store: &Store,
    ledger: &Ledger,
    actor: &Actor,
    ws: &str,
    sha256: &str,
) -> Result<Workspace, WorkspaceError> {
    approve_text(store, ledger, actor, ws, sha256, Subject::Setup)
}

/// Sets the check policy: validated with [`policy::Policy::parse`] (422
/// naming the problem). "" clears it.
pub fn set_policy(
    store: &Store,
    ledger: &Ledger,
    actor: &Actor,
    ws: &str,
    policy: &str,
) -> Result<Workspace, WorkspaceError> {
    if !policy.is_empty() {
        // The policy is TOML: bound its nesting before the parser sees it.
        if let Err(e) = project_config::toml_depth(policy.as_bytes()) {
            return Err(WorkspaceError::Unprocessable(format!(
                "the policy is not valid TOML of the expected shape: {e}"
            )));
        }
        policy::Policy::parse(policy).map_err(|e| WorkspaceError::Unprocessable(e.to_string()))?;
    }
    mutate(store, ledger, actor, |reg| {
        let w = get(reg, ws)?;
        if w.policy.text == policy {
            return Ok((w.ws_ref, None));
        }
        let change = Change::PolicySet {
            ws: w.ws_ref.clone(),
            text: policy.to_string(),
        };
        Ok((w.ws_ref, Some(change)))
    })
}

/// Approves the check policy whose SHA-256 the person reviewed (as [`approve_setup`]).
pub fn approve_policy(
    store: &Store,
    ledger: &Ledger,
    actor: &Actor,
    ws: &str,
    sha256: &str,
) -> Result<Workspace, WorkspaceError> {
    approve_text(store, ledger, actor, ws, sha256, Subject::Policy)
}

/// Approves the flagged agent configuration of the workspace folder: the hash must equal the
/// current scan's (409 otherwise: the files changed since they were reviewed).
pub fn approve_project_config(
    store: &Store,
    ledger: &Ledger,
    actor: &Actor,
    ws: &str,
    sha256: &str,
) -> Result<(Workspace, project_config::Scan), WorkspaceError> {
    approve_project_config_at(store, ledger, actor, ws, sha256, None)
}

/// The worktrees module's refusals, as this module's (same statuses).
fn from_worktree_error(e: crate::worktrees::WorktreeError) -> WorkspaceError {
    use crate::worktrees::WorktreeError as W;
    match e {
        W::Unprocessable(m) | W::TooLarge(m) => WorkspaceError::Unprocessable(m),
        W::Conflict(m) => WorkspaceError::Conflict(m),
        W::NotFound(m) => WorkspaceError::NotFound(m),
        W::Unavailable(m) | W::Internal(m) => WorkspaceError::Internal(m),
    }
}

fn from_commit_scan_error(e: project_config::CommitScanError) -> WorkspaceError {
    use project_config::CommitScanError as C;
    match e {
        C::NotACommitId(_) | C::TooLarge { .. } | C::BadLink { .. } => {
            WorkspaceError::Unprocessable(e.to_string())
        }
        other => WorkspaceError::Internal(other.to_string()),
    }
}

/// The full commit id `from` names in workspace `w`'s repository, resolved exactly as a
/// worktree start resolves `worktree_from` ([`crate::worktrees::resolve_from`]: a full
/// commit id a ref retains, or a local branch; 422 otherwise).
pub fn resolve_from(w: &Workspace, from: &str) -> Result<String, WorkspaceError> {
    let repo = crate::worktrees::validate_repo(&w.path).map_err(from_worktree_error)?;
    crate::worktrees::resolve_from(&repo, Some(from)).map_err(from_worktree_error)
}

/// The project-config scan of workspace `ws`: of its folder now, or, with `from`, of the
/// files committed at the commit `from` names ([`resolve_from`]), as a worktree started
/// there carries them.
pub fn scan_project_config(
    store: &Store,
    ws: &str,
    from: Option<&str>,
) -> Result<(Workspace, project_config::Scan), WorkspaceError> {
    let w = store.find(ws)?.ok_or_else(|| not_found(ws))?;
    let scan = match from {
        None => project_config::scan(&w.path)
            .map_err(|e| WorkspaceError::Unprocessable(e.to_string()))?,
        Some(f) => {
            let commit = resolve_from(&w, f)?;
            project_config::scan_commit(&w.path, &commit).map_err(from_commit_scan_error)?
        }
    };
    Ok((w, scan))
}

/// Approves the flagged agent configuration of the workspace folder or, with `from`, of the
/// files committed at that commit (resolved as a worktree start resolves `worktree_from`).
/// The hash must equal a scan made now (409 otherwise). The approval and its ledger entry
/// record `from` as the full commit id. Admission is unchanged: the stored (last) approval
/// must equal the hash of the folder a tool starts in.
pub fn approve_project_config_at(
    store: &Store,
    ledger: &Ledger,
    actor: &Actor,
    ws: &str,
    sha256: &str,
    from: Option<&str>,
) -> Result<(Workspace, project_config::Scan), WorkspaceError> {
    person(actor, "a folder's agent configuration")?;
    let h = check_hash(sha256)?;
    // A commit's files never change: they are read before the registry lock is taken.
    let committed = match from {
        Some(_) => Some(scan_project_config(store, ws, from)?.1),
        None => None,
    };
    let mut scanned = None;
    let w = mutate(store, ledger, actor, |reg| {
        let w = get(reg, ws)?;
        let scan = match &committed {
            Some(s) => s.clone(),
            None => project_config::scan(&w.path)
                .map_err(|e| WorkspaceError::Unprocessable(e.to_string()))?,
        };
        if scan.sha256 != h {
            let (what, review) = match &scan.commit {
                Some(c) => (
                    format!("committed at {c} in {}", w.ws_ref),
                    format!("proctor workspace project-config {} --from {c}", w.ws_ref),
                ),
                None => (
                    format!("of {}", w.ws_ref),
                    format!("proctor workspace project-config {}", w.ws_ref),
                ),
            };
            return Err(WorkspaceError::Conflict(format!(
                "the flagged agent configuration {what} has {} {}, not {h}: it is not what \
                 was reviewed (the files or the branch changed since). Review it again with \
                 `{review}`",
                project_config::RECIPE,
                scan.sha256,
            )));
        }
        let mut extra = Map::new();
        extra.insert("recipe".into(), json!(project_config::RECIPE));
        extra.insert(
            "files".into(),
            json!(
                scan.files
                    .iter()
                    .filter(|f| f.flagged)
                    .map(|f| f.path)
                    .collect::<Vec<_>>()
            ),
        );
        if let Some(c) = &scan.commit {
            extra.insert("from".into(), json!(c));
        }
        let change = Change::Approved {
            what: Subject::ProjectConfig,
            ws: w.ws_ref.clone(),
            approval: Approval {
                sha256: h.clone(),
                actor: actor.label(),
                at: now(),
                from: scan.commit.clone(),
            },
            extra,
        };
        scanned = Some(scan);
        Ok((w.ws_ref, Some(change)))
    })?;
    let scan = match scanned {
        Some(s) => s,
        None => project_config::scan(&w.path)
            .map_err(|e| WorkspaceError::Unprocessable(e.to_string()))?,
    };
    Ok((w, scan))
}

#[cfg(test)]
mod tests;
