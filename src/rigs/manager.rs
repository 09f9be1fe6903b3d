//! The rigs of one server (`server::Shared::rigs`): open, list, show, the one chokepoint
//! every action goes through ([`Rigs::act`]: the control lock, the audit, the use that resets
//! the idle clock), watchers, the TTL and the idle ladder ([`Rigs::tick`]), the memory budget
//! and its eviction, teardown at stop and the orphan sweep at start.
//!
//! The lock rules ([`check_lock`]) and the eviction order ([`evict_order`]) are pure
//! functions of the records, tested on their own.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde_json::{Map, Value, json};

use super::RigError;
use super::audit::AuditLog;
use super::backend::{self, LaunchSpec, Machine, OWNER_VAR};
use super::model::{
    Action, AuditPage, BackendKind, CloseReason, ImageRef, Lock, OpenRequest, Outcome, RigRecord,
    RigState, RigView, Settings, TTL_MAX_SECS, parse_duration,
};
use super::{image, store, workspace};
use crate::auth::{Actor, Principal};
use crate::home::Home;
use crate::ledger::Ledger;
use crate::runs::{Run, TermSize};

/// The most `--allow` entries one rig may have.
pub const ALLOW_MAX: usize = 16;
/// How long a launch may take to boot.
pub const BOOT_TIMEOUT: Duration = Duration::from_secs(120);
/// The grace of a shutdown before KILL.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// The home's tag in [`OWNER_VAR`]: the first 16 hex of the SHA-256 of the data folder's path.
pub fn home_tag(home: &Home) -> String {
    use sha2::{Digest, Sha256};
    let h = Sha256::digest(home.data.as_os_str().as_encoded_bytes());
    hex::encode(h)[..16].to_string()
}

struct Entry {
    rec: RigRecord,
    machine: Option<Arc<dyn Machine>>,
    lock: Option<Lock>,
    watchers: u32,
    audit: Arc<AuditLog>,
    /// The host repository a fetch goes into (the workspace's path).
    host_repo: Option<PathBuf>,
}

type Table = Arc<Mutex<BTreeMap<String, Entry>>>;

pub struct Rigs {
    home: Home,
    ledger: Arc<Ledger>,
    exe: PathBuf,
    table: Table,
}

/// How a session's provider process enters a rig ([`Rigs::enter`]).
#[derive(Debug, Clone)]
pub struct SessionEntry {
    /// The host argv that enters the guest; the provider's argv is appended.
    pub prefix: Vec<String>,
    /// The guest's root as the host sees it.
    pub root: PathBuf,
    /// The proctor binary inside the guest.
    pub proctor: String,
    /// The guest's PATH.
    pub path: String,
    pub boundary: super::model::Boundary,
    /// The guest folder the provider works in.
    pub cwd: String,
    /// Held while the session's process lives: the rig counts it as a watcher (use: the idle
    /// ladder leaves it running, the budget never evicts it); dropped, the session's end is
    /// audited.
    pub hold: Arc<dyn std::any::Any + Send + Sync>,
}

impl SessionEntry {
    /// The entering prefix with another guest working folder (which must exist when the
    /// prefix is spawned): the same namespaces, the same dropped capabilities.
    pub fn prefix_at(&self, cwd: &str) -> Vec<String> {
        self.prefix
            .iter()
            .map(|a| {
                if a.starts_with("--wdns=") {
                    format!("--wdns={cwd}")
                } else {
                    a.clone()
                }
            })
            .collect()
    }
}

struct SessionGuard {
    table: Table,
    id: String,
    by: Actor,
    audit: Arc<AuditLog>,
    /// What entered: `session` or `factory` (the audit's action).
    purpose: &'static str,
}

impl Drop for SessionGuard {
    fn drop(&mut self) {
        if let Some(e) = lock_table(&self.table).get_mut(&self.id) {
            e.watchers = e.watchers.saturating_sub(1);
            e.rec.last_used_at = now_s();
        }
        let _ = self
            .audit
            .append(&self.by, self.purpose, "ended", json!({}));
    }
}

/// An attached terminal or a watcher: counts as use while it lives; dropped, it is gone
/// (and `detach` is audited).
pub struct Watch {
    /// The rig's console (its ring for the SSE stream).
    pub console: Run,
    _guard: Box<dyn Send + Sync>,
}

struct WatchGuard {
    table: Table,
    id: String,
    by: Actor,
    audit: Arc<AuditLog>,
}

impl Drop for WatchGuard {
    fn drop(&mut self) {
        if let Some(e) = lock_table(&self.table).get_mut(&self.id) {
            e.watchers = e.watchers.saturating_sub(1);
            e.rec.last_used_at = now_s();
        }
        let _ = self.audit.append(&self.by, "detach", "done", json!({}));
    }
}

fn lock_table(t: &Table) -> MutexGuard<'_, BTreeMap<String, Entry>> {
    t.lock().unwrap_or_else(|e| e.into_inner())
}

fn now_s() -> String {
    crate::ledger::now_at()
}

fn parse_at(s: &str) -> Option<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .map(|d| d.with_timezone(&Utc))
}

fn secs_between(from: &str, to: DateTime<Utc>) -> u64 {
    parse_at(from).map_or(0, |f| (to - f).num_seconds().max(0) as u64)
}

/// What an action does to the lock, once allowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LockEffect {
    /// Nothing changes.
    Keep,
    /// `by` takes it now.
    Take,
    /// It is released.
    Release,
}

/// The lock rules, a pure function: a person's lock refuses an agent's mutating action (423);
/// only a person takes it (403 otherwise), the holder re-taking it is a no-op, another person
/// is refused (423); only the holder's token releases it (403 otherwise).
/// `by` is the lock's holder: its token, and a person (the kernel's word) using it.
fn holds(lock: &Lock, by: &Actor) -> bool {
    lock.holder.token_id == by.token_id && by.principal == Principal::Person
}

pub fn check_lock(
    id: &str,
    lock: Option<&Lock>,
    by: &Actor,
    action: &Action,
) -> Result<LockEffect, RigError> {
    let locked = |l: &Lock| RigError::Locked {
        holder: l.holder.clone(),
        since: l.since.clone(),
        message: format!(
            "{id} is locked by {}, a person, since {}: observation (screen, cp out, audit) still \
             works; ask them to run `proctor rig unlock {id}`",
            l.holder.label(),
            l.since
        ),
    };
    match action {
        Action::Lock => {
            if by.principal != Principal::Person {
                return Err(RigError::Forbidden(format!(
                    "only a person takes {id}'s control lock; an agent identity cannot"
                )));
            }
            match lock {
                Some(l) if holds(l, by) => Ok(LockEffect::Keep),
                Some(l) => Err(locked(l)),
                None => Ok(LockEffect::Take),
            }
        }
        // The holder is a person with a token: the same token in an agent's hands (the
        // kernel says agent: a process the server started read it) is not the holder.
        Action::Unlock => match lock {
            None => Ok(LockEffect::Keep),
            Some(l) if holds(l, by) => Ok(LockEffect::Release),
            Some(l) => Err(RigError::Forbidden(format!(
                "{id}'s lock is held by {}; only its holder releases it",
                l.holder.label()
            ))),
        },
        a if a.is_mutating() => match lock {
            // Exclusive: every mutating action but the holder's own is refused.
            Some(l) if !holds(l, by) => Err(locked(l)),
            _ => Ok(LockEffect::Keep),
        },
        _ => Ok(LockEffect::Keep),
    }
}

/// One open rig as the budget sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Charge {
    pub id: String,
    /// `max(resident now, reserved)` in MiB.
    pub charged_mb: u64,
    pub last_used_at: String,
    /// A person holds its lock.
    pub person_lock: bool,
    pub watchers: u32,
}

/// The rigs to close so that `need_mb` more fits in `budget_mb`: least recently used first,
/// never one a person holds the lock of or anyone watches. `Err` with the message when even
/// closing every candidate does not make room.
pub fn evict_order(
    charges: &[Charge],
    need_mb: u64,
    budget_mb: u64,
) -> Result<Vec<String>, String> {
    let mut used: u64 = charges.iter().map(|c| c.charged_mb).sum();
    if used + need_mb <= budget_mb {
        return Ok(Vec::new());
    }
    let mut cands: Vec<&Charge> = charges
        .iter()
        .filter(|c| !c.person_lock && c.watchers == 0)
        .collect();
    cands.sort_by(|a, b| {
        let ka = parse_at(&a.last_used_at);
        let kb = parse_at(&b.last_used_at);
        ka.cmp(&kb).then_with(|| a.id.cmp(&b.id))
    });
    let mut out = Vec::new();
    for c in cands {
        if used + need_mb <= budget_mb {
            break;
        }
        used -= c.charged_mb;
        out.push(c.id.clone());
    }
    if used + need_mb > budget_mb {
        let total: u64 = charges.iter().map(|c| c.charged_mb).sum();
        return Err(format!(
            "the rigs' memory budget is {budget_mb} MB: {total} MB are charged to {} open rigs \
             (those a person locks or someone watches are never evicted) and this rig needs \
             {need_mb} MB; close a rig (`proctor rig close RIG`) or raise memory_budget_mb in \
             config/rigs.toml",
            charges.len()
        ));
    }
    Ok(out)
}

fn audit_detail(action: &Action) -> Value {
    use base64::Engine;
    match action {
        Action::Exec(r) => json!({"argv": r.argv}),
        Action::Type(t) => {
            let bytes = match (&t.text, &t.data_b64) {
                (Some(s), _) => s.len(),
                (None, Some(b)) => base64::engine::general_purpose::STANDARD
                    .decode(b)
                    .map_or(0, |v| v.len()),
                _ => 0,
            };
            json!({"bytes": bytes, "paste": t.paste})
        }
        Action::Resize(s) => json!({"rows": s.rows, "cols": s.cols}),
        Action::PutFile { path, bytes, mode } => {
            json!({"path": path, "bytes": bytes.len(), "mode": format!("{mode:o}")})
        }
        Action::GetFile { path } => json!({"path": path}),
        _ => json!({}),
    }
}

fn fields(pairs: &[(&str, Value)]) -> Map<String, Value> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

impl Rigs {
    /// `exe`: the proctor binary the guests' agents and relays run as. Loads every record.
    pub fn new(home: Home, ledger: Arc<Ledger>, exe: PathBuf) -> Arc<Rigs> {
        let mut map = BTreeMap::new();
        let (recs, errs) = store::load_all(&home);
        for e in errs {
            crate::log::log(&format!("rigs: a record could not be read: {e}"));
        }
        for rec in recs {
            let dir = store::rig_dir(&home, &rec.id);
            let audit = match AuditLog::open(&dir) {
                Ok(a) => Arc::new(a),
                Err(e) => {
                    crate::log::log(&format!("rigs: {}: the audit log: {e}", rec.id));
                    continue;
                }
            };
            let host_repo = rec
                .workspace
                .as_deref()
                .and_then(|w| crate::workspaces::find(&home, w).ok().flatten())
                .map(|w| w.path);
            map.insert(
                rec.id.clone(),
                Entry {
                    rec,
                    machine: None,
                    lock: None,
                    watchers: 0,
                    audit,
                    host_repo,
                },
            );
        }
        Arc::new(Rigs {
            home,
            ledger,
            exe,
            table: Arc::new(Mutex::new(map)),
        })
    }

    fn ledger(&self, kind: &str, pairs: &[(&str, Value)]) {
        if let Err(e) = self.ledger.append(kind, &fields(pairs)) {
            crate::log::log(&format!("rigs: the ledger refused {kind}: {e}"));
        }
    }

    fn save(&self, rec: &RigRecord) {
        if let Err(e) = store::save(&self.home, rec) {
            crate::log::log(&format!(
                "rigs: {}: the record could not be written: {e}",
                rec.id
            ));
        }
    }

    /// At server start: ends every engine a dead server left (its recorded pid with a matching
    /// start time and owner tag), marks those rigs closed `orphan_swept`; returns their ids.
    /// Also ends any process carrying this home's tag that no open record names.
    pub fn sweep_orphans(&self) -> Vec<String> {
        let tag = home_tag(&self.home);
        let mut swept = Vec::new();
        let mut recs = Vec::new();
        {
            let mut t = lock_table(&self.table);
            for e in t.values_mut() {
                if e.machine.is_some() || !e.rec.state.is_open() {
                    continue;
                }
                let owner = format!("{tag}/{}", e.rec.id);
                let mut killed = false;
                if let (Some(pid), Some(start)) = (e.rec.pid, e.rec.pid_start)
                    && crate::runs::process::is_same_process(pid, start)
                    && owner_of(pid).as_deref() == Some(owner.as_str())
                {
                    kill_engine(pid);
                    killed = true;
                }
                e.rec.state = RigState::Closed;
                e.rec.close_reason = Some(CloseReason::OrphanSwept);
                e.rec.closed_at = Some(now_s());
                recs.push(e.rec.clone());
                swept.push((e.rec.id.clone(), killed));
            }
        }
        for r in &recs {
            self.save(r);
        }
        for (id, killed) in &swept {
            self.ledger(
                "rig.swept",
                &[("rig", json!(id)), ("engine_killed", json!(killed))],
            );
        }
        self.kill_untracked_engines();
        swept.into_iter().map(|(id, _)| id).collect()
    }

    /// Kills every process carrying this home's owner tag ([`OWNER_VAR`]) that no running
    /// machine of ours owns: a dead server's engines at start, and at stop an engine whose
    /// launch had not finished (a VM still booting when the server stops).
    fn kill_untracked_engines(&self) {
        let tag = home_tag(&self.home);
        let live: Vec<u32> = {
            let t = lock_table(&self.table);
            t.values()
                .filter_map(|e| e.machine.as_ref().map(|m| m.pid().0))
                .collect()
        };
        let me = std::process::id();
        if let Ok(rd) = std::fs::read_dir("/proc") {
            for ent in rd.flatten() {
                let Some(pid) = ent.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                    continue;
                };
                if pid == me || live.contains(&pid) {
                    continue;
                }
                if let Some(o) = owner_of(pid)
                    && o.strip_prefix(&tag).is_some_and(|r| r.starts_with('/'))
                {
                    let rig = o[tag.len() + 1..].to_string();
                    let owned_live = lock_table(&self.table)
                        .get(&rig)
                        .is_some_and(|e| e.machine.is_some());
                    if !owned_live {
                        kill_engine(pid);
                    }
                }
            }
        }
    }

    /// Reads `config/rigs.toml` (defaults when absent; a malformed file is refused by name).
    pub fn settings(&self) -> Result<Settings, RigError> {
        load_settings(&self.home.config.join("rigs.toml"))
    }

    /// Opens a rig: checks the request, keeps the budget (evicting), records it `booting` and
    /// launches in the background; returns the booting view. The ledger gets `rig.opened`.
    pub fn open(self: &Arc<Self>, by: &Actor, req: OpenRequest) -> Result<RigView, RigError> {
        let settings = self.settings()?;
        let backend = req.backend.unwrap_or_default();
        let dur = |field: &str, v: &str| {
            parse_duration(v).map_err(|e| RigError::BadRequest(format!("{field}: {e}")))
        };
        let ttl_secs = dur("ttl", req.ttl.as_deref().unwrap_or(&settings.ttl))?;
        if ttl_secs > TTL_MAX_SECS {
            return Err(RigError::BadRequest(format!(
                "ttl: {ttl_secs}s is over the longest a rig may live, {}h",
                TTL_MAX_SECS / 3600
            )));
        }
        let idle_secs = dur("idle", req.idle.as_deref().unwrap_or(&settings.idle))?;
        if req.allow.len() > ALLOW_MAX {
            return Err(RigError::BadRequest(format!(
                "allow: {} services; a rig admits at most {ALLOW_MAX}",
                req.allow.len()
            )));
        }
        let allow = req
            .allow
            .iter()
            .map(|a| super::model::Allow::parse(a).map_err(RigError::BadRequest))
            .collect::<Result<Vec<_>, _>>()?;
        let size = TermSize {
            rows: req.rows.unwrap_or(24),
            cols: req.cols.unwrap_or(80),
        };
        if !size.is_allowed() {
            return Err(RigError::BadRequest(format!(
                "rows/cols: {}x{} is not a terminal size proctor allows",
                size.rows, size.cols
            )));
        }
        let image = image::current(&self.home)?;
        if backend == BackendKind::Vm && image.is_none() {
            return Err(RigError::Unavailable(
                "no rig image is built; build one with `proctor rig image build` (or open a \
                 namespace rig: --backend namespace)"
                    .into(),
            ));
        }
        if let Some(a) = backend::availability()
            .into_iter()
            .find(|a| a.backend == backend)
            && !a.available
        {
            return Err(RigError::Unavailable(format!(
                "the {} backend cannot run here: {}",
                backend.as_str(),
                a.detail
            )));
        }
        let ws = match &req.workspace {
            None => None,
            Some(w) => Some(
                crate::workspaces::find(&self.home, w)
                    .map_err(RigError::internal)?
                    .ok_or_else(|| {
                        RigError::BadRequest(format!(
                            "workspace {}: not registered; register it with `proctor workspace \
                             add PATH`",
                            crate::text::one_line(w, 200)
                        ))
                    })?,
            ),
        };
        let reserved_mb = match backend {
            BackendKind::Vm => settings.vm_memory_mb + 64,
            BackendKind::Namespace => settings.namespace_floor_mb,
        };
        // The budget: evict least recently used rigs nobody drives or watches.
        let victims = {
            let t = lock_table(&self.table);
            let charges: Vec<Charge> = t
                .values()
                .filter(|e| e.rec.state.is_open())
                .map(charge_of)
                .collect();
            evict_order(&charges, reserved_mb, settings.memory_budget_mb)
                .map_err(RigError::Unavailable)?
        };
        for v in &victims {
            let _ = self.close_one(v, CloseReason::MemoryBudget, None);
        }
        let (id, dir) = store::reserve(&self.home)?;
        let staged = match &ws {
            Some(w) => {
                let dest = dir.join("work");
                if let Err(e) = workspace::stage(&w.path, &dest) {
                    let _ = std::fs::remove_dir_all(&dir);
                    return Err(e);
                }
                Some(dest)
            }
            None => None,
        };
        let now = Utc::now();
        let at = now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let expires = (now + chrono::Duration::seconds(ttl_secs as i64))
            .to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let rec = RigRecord {
            id: id.clone(),
            kind: req.kind,
            backend,
            boundary: None,
            state: RigState::Booting,
            opened_by: by.clone(),
            opened_at: at.clone(),
            ttl_secs,
            expires_at: expires,
            idle_secs,
            last_used_at: at,
            allow: allow.clone(),
            workspace: ws.as_ref().map(|w| w.ws_ref.clone()),
            image: image.as_ref().map(|i| ImageRef {
                digest: i.digest.clone(),
                recipe: i.recipe.clone(),
            }),
            reserved_mb,
            pid: None,
            pid_start: None,
            closed_at: None,
            close_reason: None,
            error: None,
        };
        store::save(&self.home, &rec)?;
        let audit = Arc::new(AuditLog::open(&dir)?);
        let _ = audit.append(by, "open", "done", json!({"backend": backend.as_str()}));
        self.ledger(
            "rig.opened",
            &[
                ("rig", json!(id)),
                ("backend", json!(backend.as_str())),
                ("by", json!(by.token_id)),
                ("ttl_secs", json!(ttl_secs)),
            ],
        );
        let view = {
            let mut t = lock_table(&self.table);
            t.insert(
                id.clone(),
                Entry {
                    rec,
                    machine: None,
                    lock: None,
                    watchers: 0,
                    audit,
                    host_repo: ws.map(|w| w.path),
                },
            );
            view_of(t.get(&id).expect("just inserted"))
        };
        let spec = LaunchSpec {
            id: id.clone(),
            dir,
            image,
            allow,
            workspace: staged,
            memory_mb: settings.vm_memory_mb,
            size,
            owner_tag: format!("{}/{id}", home_tag(&self.home)),
            proctor_exe: self.exe.clone(),
            boot_timeout: BOOT_TIMEOUT,
        };
        let me = Arc::clone(self);
        std::thread::Builder::new()
            .name(format!("rig-launch-{id}"))
            .spawn(move || me.launched(backend, spec))
            .map_err(RigError::internal)?;
        Ok(view)
    }

    fn launched(&self, backend: BackendKind, spec: LaunchSpec) {
        let result = backend::launch(backend, &spec);
        let mut t = lock_table(&self.table);
        let Some(e) = t.get_mut(&spec.id) else { return };
        match result {
            Ok(m) => {
                let m: Arc<dyn Machine> = Arc::from(m);
                if e.rec.state != RigState::Booting {
                    // Closed while booting (TTL, server stop): end what started.
                    drop(t);
                    let _ = m.shutdown(SHUTDOWN_GRACE);
                    return;
                }
                let (pid, start) = m.pid();
                e.rec.pid = Some(pid);
                e.rec.pid_start = start;
                e.rec.boundary = Some(m.boundary());
                e.rec.allow = m.allow();
                e.rec.state = RigState::Running;
                e.machine = Some(m);
                let rec = e.rec.clone();
                drop(t);
                self.save(&rec);
                self.ledger(
                    "rig.running",
                    &[("rig", json!(rec.id)), ("pid", json!(pid))],
                );
            }
            Err(err) => {
                if e.rec.state == RigState::Closed {
                    return;
                }
                e.rec.state = RigState::Closed;
                e.rec.close_reason = Some(CloseReason::Failed);
                e.rec.closed_at = Some(now_s());
                e.rec.error = Some(crate::text::one_line(&err.to_string(), 500));
                let rec = e.rec.clone();
                drop(t);
                self.save(&rec);
                self.ledger(
                    "rig.closed",
                    &[
                        ("rig", json!(rec.id)),
                        ("reason", json!("failed")),
                        ("error", json!(rec.error)),
                    ],
                );
            }
        }
    }

    /// Every rig, open ones first, then closed ones (newest first).
    pub fn list(&self) -> Vec<RigView> {
        let t = lock_table(&self.table);
        let mut v: Vec<RigView> = t.values().map(view_of).collect();
        v.sort_by(|a, b| {
            let oa = a.record.state.is_open();
            let ob = b.record.state.is_open();
            ob.cmp(&oa).then_with(|| b.record.id.cmp(&a.record.id))
        });
        v
    }

    pub fn show(&self, id: &str) -> Result<RigView, RigError> {
        lock_table(&self.table)
            .get(id)
            .map(view_of)
            .ok_or_else(|| not_found(id))
    }

    /// Closes one rig (`by`: who asked, for the ledger), marking it `closing` first so that
    /// nobody else acts on it meanwhile.
    fn close_one(&self, id: &str, reason: CloseReason, by: Option<&Actor>) -> Result<(), RigError> {
        let machine = {
            let mut t = lock_table(&self.table);
            let e = t.get_mut(id).ok_or_else(|| not_found(id))?;
            if matches!(e.rec.state, RigState::Closed | RigState::Closing) {
                return Ok(());
            }
            e.rec.state = RigState::Closing;
            e.machine.clone()
        };
        let err = machine.and_then(|m| m.shutdown(SHUTDOWN_GRACE).err());
        let rec = {
            let mut t = lock_table(&self.table);
            let e = t.get_mut(id).ok_or_else(|| not_found(id))?;
            e.machine = None;
            e.lock = None;
            e.rec.state = RigState::Closed;
            e.rec.close_reason = Some(reason);
            e.rec.closed_at = Some(now_s());
            if let Some(err) = &err {
                e.rec.error = Some(crate::text::one_line(&err.to_string(), 500));
            }
            e.rec.clone()
        };
        self.save(&rec);
        let reason_s = serde_json::to_value(reason).unwrap_or(Value::Null);
        let mut f = vec![("rig", json!(id)), ("reason", reason_s)];
        if let Some(by) = by {
            f.push(("by", json!(by.token_id)));
        }
        self.ledger("rig.closed", &f);
        Ok(())
    }

    /// THE chokepoint: every action on a rig, observation included. A person's lock refuses
    /// an agent's mutating actions (423 naming the holder and since when); input events are
    /// audited (refusals too) with the caller's principal and the next seq.
    pub fn act(&self, by: &Actor, id: &str, action: Action) -> Result<Outcome, RigError> {
        let (machine, audit, resume_first, host_repo) = {
            let mut t = lock_table(&self.table);
            let e = t.get_mut(id).ok_or_else(|| not_found(id))?;
            match e.rec.state {
                RigState::Closed | RigState::Closing => {
                    return Err(RigError::Conflict(format!(
                        "{id} is {}: nothing acts on it any more; open another with `proctor rig \
                         open`",
                        e.rec.state.as_str()
                    )));
                }
                RigState::Booting => {
                    return Err(RigError::Conflict(format!(
                        "{id} is still booting; try again once `proctor rig show {id}` says \
                         running"
                    )));
                }
                _ => {}
            }
            let effect = match check_lock(id, e.lock.as_ref(), by, &action) {
                Ok(x) => x,
                Err(err) => {
                    let mut d = audit_detail(&action);
                    if let Value::Object(m) = &mut d {
                        m.insert("error".into(), json!(err.code()));
                    }
                    e.audit.append(by, action.name(), "refused", d)?;
                    return Err(err);
                }
            };
            match effect {
                LockEffect::Take => {
                    e.lock = Some(Lock {
                        holder: by.clone(),
                        since: now_s(),
                    })
                }
                LockEffect::Release => e.lock = None,
                LockEffect::Keep => {}
            }
            e.rec.last_used_at = now_s();
            // What needs the guest's CPUs resumes it first (a file read too: the agent runs
            // in the guest); the screen is the host's copy and needs nothing.
            let resume_first = e.rec.state == RigState::Suspended
                && matches!(
                    action,
                    Action::Exec(_)
                        | Action::Type(_)
                        | Action::Resize(_)
                        | Action::PutFile { .. }
                        | Action::GetFile { .. }
                        | Action::Fetch
                );
            (
                e.machine.clone(),
                Arc::clone(&e.audit),
                resume_first,
                e.host_repo.clone(),
            )
        };
        let machine =
            machine.ok_or_else(|| RigError::Conflict(format!("{id} has no engine attached")))?;
        if resume_first {
            self.set_suspended(id, &*machine, false, by, "use")?;
        }
        let detail = audit_detail(&action);
        let name = action.name();
        let result = self.perform(by, id, &*machine, action, host_repo);
        if name != "screen" {
            let outcome = if result.is_ok() { "done" } else { "failed" };
            audit.append(by, name, outcome, detail)?;
        }
        result
    }

    /// A session's way into a rig (`session start --rig`), through the same rules as
    /// [`Rigs::act`]: a closed, closing or booting rig is refused (409), a person's lock
    /// refuses an agent (423, audited as a refused `session`); a suspended rig is resumed.
    /// Answers the host argv prefix that enters the guest ([`Machine::enter_command`] with
    /// no argv: the caller appends the provider's), the boundary, and the guest working
    /// folder (`/work` when the rig has a workspace, else `/root`). The entry is audited.
    pub fn enter(&self, by: &Actor, id: &str) -> Result<SessionEntry, RigError> {
        self.enter_as(by, id, "session", None)
    }

    /// [`Rigs::enter`] for `purpose` (`session` or `factory`, the audit's action), entering
    /// at `cwd` (a guest folder that exists; `None`: `/work` or `/root` as for a session).
    pub fn enter_as(
        &self,
        by: &Actor,
        id: &str,
        purpose: &'static str,
        cwd: Option<&str>,
    ) -> Result<SessionEntry, RigError> {
        let probe = Action::Exec(super::model::ExecRequest {
            argv: vec!["session".into()],
            stdin_b64: None,
            cwd: None,
            timeout_secs: None,
        });
        let (machine, audit, suspended, cwd) = {
            let mut t = lock_table(&self.table);
            let e = t.get_mut(id).ok_or_else(|| not_found(id))?;
            if e.rec.backend == BackendKind::Vm {
                let err = RigError::Unavailable(format!("{id}: {}", backend::VM_ENTER_REFUSAL));
                e.audit
                    .append(by, purpose, "refused", json!({"error": err.code()}))?;
                return Err(err);
            }
            match e.rec.state {
                RigState::Closed | RigState::Closing => {
                    return Err(RigError::Conflict(format!(
                        "{id} is {}: no session starts in it; open another with `proctor rig \
                         open --backend namespace`",
                        e.rec.state.as_str()
                    )));
                }
                RigState::Booting => {
                    return Err(RigError::Conflict(format!(
                        "{id} is still booting; try again once `proctor rig show {id}` says \
                         running"
                    )));
                }
                _ => {}
            }
            if let Err(err) = check_lock(id, e.lock.as_ref(), by, &probe) {
                e.audit
                    .append(by, purpose, "refused", json!({"error": err.code()}))?;
                return Err(err);
            }
            e.rec.last_used_at = now_s();
            let cwd = match cwd {
                Some(c) => c,
                None if e.host_repo.is_some() => "/work",
                None => "/root",
            };
            (
                e.machine.clone(),
                Arc::clone(&e.audit),
                e.rec.state == RigState::Suspended,
                cwd.to_string(),
            )
        };
        let machine =
            machine.ok_or_else(|| RigError::Conflict(format!("{id} has no engine attached")))?;
        let boundary = machine.boundary();
        let entered = match machine.enter_command(&[], &cwd) {
            Ok(x) => x,
            Err(err) => {
                audit.append(by, purpose, "failed", json!({"error": err.code()}))?;
                return Err(err);
            }
        };
        if suspended {
            self.set_suspended(id, &*machine, false, by, "use")?;
        }
        audit.append(by, purpose, "done", json!({"cwd": cwd}))?;
        let hold: Arc<dyn std::any::Any + Send + Sync> = {
            let mut t = lock_table(&self.table);
            let e = t.get_mut(id).ok_or_else(|| not_found(id))?;
            e.watchers += 1;
            Arc::new(SessionGuard {
                table: Arc::clone(&self.table),
                id: id.to_string(),
                by: by.clone(),
                audit: Arc::clone(&audit),
                purpose,
            })
        };
        Ok(SessionEntry {
            hold,
            prefix: entered.argv,
            root: entered.root,
            proctor: entered.proctor,
            path: entered.path,
            boundary,
            cwd,
        })
    }

    fn perform(
        &self,
        by: &Actor,
        id: &str,
        m: &dyn Machine,
        action: Action,
        host_repo: Option<PathBuf>,
    ) -> Result<Outcome, RigError> {
        use base64::Engine;
        let rig = |s: &Self| s.show(id).map(|v| Outcome::Rig(Box::new(v)));
        match action {
            Action::Exec(req) => m.exec(&req).map(Outcome::Exec),
            Action::Type(t) => {
                let bytes = match (t.text, t.data_b64) {
                    (Some(s), _) => s.into_bytes(),
                    (None, Some(b)) => base64::engine::general_purpose::STANDARD
                        .decode(b)
                        .map_err(|e| RigError::BadRequest(format!("data_b64: {e}")))?,
                    _ => return Err(RigError::BadRequest("give text or data_b64".into())),
                };
                m.console()
                    .write_input(&bytes)
                    .map_err(RigError::internal)?;
                rig(self)
            }
            Action::Resize(s) => {
                m.console()
                    .resize(s)
                    .map_err(|e| RigError::BadRequest(e.to_string()))?;
                rig(self)
            }
            Action::PutFile { path, bytes, mode } => {
                if bytes.len() > super::model::FILE_MAX {
                    return Err(RigError::TooLarge(format!(
                        "{} bytes is over the {}-byte bound of a file copied in",
                        bytes.len(),
                        super::model::FILE_MAX
                    )));
                }
                m.put_file(&path, &bytes, mode)?;
                rig(self)
            }
            Action::GetFile { path } => {
                m.get_file(&path, super::model::FILE_MAX).map(Outcome::File)
            }
            Action::Screen => m
                .console()
                .screen()
                .map(Outcome::Screen)
                .map_err(RigError::internal),
            Action::Lock | Action::Unlock => rig(self),
            Action::Suspend => {
                self.set_suspended(id, m, true, by, "requested")?;
                rig(self)
            }
            Action::Resume => {
                self.set_suspended(id, m, false, by, "requested")?;
                rig(self)
            }
            Action::Close => {
                self.close_one(id, CloseReason::Requested, Some(by))?;
                rig(self)
            }
            Action::Fetch => {
                let repo = host_repo.ok_or_else(|| {
                    RigError::Conflict(format!(
                        "{id} was opened without --workspace: there is nothing to fetch"
                    ))
                })?;
                let dir = store::rig_dir(&self.home, id);
                let report = workspace::fetch(m, &repo, id, &dir)?;
                self.ledger(
                    "rig.fetched",
                    &[
                        ("rig", json!(id)),
                        ("by", json!(by.token_id)),
                        ("refs", json!(report.refs.len())),
                    ],
                );
                Ok(Outcome::Fetched(report))
            }
        }
    }

    fn set_suspended(
        &self,
        id: &str,
        m: &dyn Machine,
        suspend: bool,
        by: &Actor,
        reason: &str,
    ) -> Result<(), RigError> {
        let want = if suspend {
            RigState::Suspended
        } else {
            RigState::Running
        };
        {
            let t = lock_table(&self.table);
            if t.get(id).is_some_and(|e| e.rec.state == want) {
                return Ok(());
            }
        }
        if suspend {
            m.suspend()?
        } else {
            m.resume()?
        }
        let rec = {
            let mut t = lock_table(&self.table);
            let e = t.get_mut(id).ok_or_else(|| not_found(id))?;
            e.rec.state = want;
            e.rec.clone()
        };
        self.save(&rec);
        self.ledger(
            if suspend {
                "rig.suspended"
            } else {
                "rig.resumed"
            },
            &[
                ("rig", json!(id)),
                ("by", json!(by.token_id)),
                ("reason", json!(reason)),
            ],
        );
        Ok(())
    }

    /// The audit log from `after + 1`, at most `limit` (≤ 1000) events.
    pub fn audit(&self, id: &str, after: u64, limit: usize) -> Result<AuditPage, RigError> {
        let audit = lock_table(&self.table)
            .get(id)
            .map(|e| Arc::clone(&e.audit))
            .ok_or_else(|| not_found(id))?;
        audit.page(id, after, limit)
    }

    /// A watcher of the rig's console (`rig attach`, the cockpit's view): counts as use.
    pub fn watch(&self, by: &Actor, id: &str) -> Result<Watch, RigError> {
        let mut t = lock_table(&self.table);
        let e = t.get_mut(id).ok_or_else(|| not_found(id))?;
        let m = match (&e.machine, e.rec.state) {
            (Some(m), RigState::Running | RigState::Suspended) => Arc::clone(m),
            _ => {
                return Err(RigError::Conflict(format!(
                    "{id} is {}: there is no terminal to attach to",
                    e.rec.state.as_str()
                )));
            }
        };
        e.watchers += 1;
        e.rec.last_used_at = now_s();
        let audit = Arc::clone(&e.audit);
        drop(t);
        audit.append(by, "attach", "done", json!({}))?;
        Ok(Watch {
            console: m.console().clone(),
            _guard: Box::new(WatchGuard {
                table: Arc::clone(&self.table),
                id: id.to_string(),
                by: by.clone(),
                audit,
            }),
        })
    }

    /// Enforces the TTL and the idle ladder (suspend after the idle window, close after
    /// twice it); the server calls it every second. Correct at any rate: each step is decided
    /// from the records' times, and a rig being closed is marked so no second tick acts on it.
    /// Whether the ticker has anything to look at: a rig that is not closed. With none, the
    /// server's clock wakes no thread for the rigs (issue 17: a wakeup each second kept idle
    /// request threads alive).
    pub fn any_open(&self) -> bool {
        lock_table(&self.table)
            .values()
            .any(|e| !matches!(e.rec.state, RigState::Closed))
    }

    pub fn tick(&self) {
        let now = Utc::now();
        let now_at = now.to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
        let mut closes = Vec::new();
        let mut suspends = Vec::new();
        {
            let mut t = lock_table(&self.table);
            for e in t.values_mut() {
                match tick_decision(&e.rec, e.watchers, now) {
                    TickStep::Close(r) => closes.push((e.rec.id.clone(), r)),
                    TickStep::Suspend => {
                        if let Some(m) = &e.machine {
                            suspends.push((e.rec.id.clone(), Arc::clone(m)));
                        }
                    }
                    TickStep::Touch => e.rec.last_used_at = now_at.clone(),
                    TickStep::Nothing => {}
                }
            }
        }
        let system = Actor {
            token_id: "server".into(),
            name: "proctor".into(),
            principal: Principal::Person,
        };
        for (id, m) in suspends {
            if let Err(e) = self.set_suspended(&id, &*m, true, &system, "idle") {
                crate::log::log(&format!("rigs: {id}: the idle suspend failed: {e}"));
            }
        }
        std::thread::scope(|s| {
            for (id, r) in &closes {
                s.spawn(move || self.close_one(id, *r, None));
            }
        });
    }

    /// Closes every open rig (server stop: `server_stop`), in parallel; returns when all are
    /// gone.
    pub fn close_all(&self, reason: CloseReason) {
        let ids: Vec<String> = lock_table(&self.table)
            .values()
            .filter(|e| e.rec.state.is_open())
            .map(|e| e.rec.id.clone())
            .collect();
        std::thread::scope(|s| {
            for id in &ids {
                s.spawn(move || self.close_one(id, reason, None));
            }
        });
        // A rig still booting has no machine yet: its engine is found by its tag.
        self.kill_untracked_engines();
    }
}

/// What one tick does to one rig.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TickStep {
    Nothing,
    /// Watched: its use is now.
    Touch,
    Suspend,
    Close(CloseReason),
}

/// The TTL and the idle ladder, a pure function of the record: the TTL is hard (locked or
/// watched, it closes); a watched rig is in use; unused for the idle window it is suspended,
/// for twice it closed.
pub fn tick_decision(rec: &RigRecord, watchers: u32, now: DateTime<Utc>) -> TickStep {
    if matches!(rec.state, RigState::Closed | RigState::Closing) {
        return TickStep::Nothing;
    }
    if parse_at(&rec.expires_at).is_some_and(|x| now >= x) {
        return TickStep::Close(CloseReason::TtlExpired);
    }
    if rec.state == RigState::Booting {
        return TickStep::Nothing;
    }
    if watchers > 0 {
        return TickStep::Touch;
    }
    let unused = secs_between(&rec.last_used_at, now);
    if unused >= rec.idle_secs.saturating_mul(2) {
        TickStep::Close(CloseReason::Idle)
    } else if unused >= rec.idle_secs && rec.state == RigState::Running {
        TickStep::Suspend
    } else {
        TickStep::Nothing
    }
}

fn charge_of(e: &Entry) -> Charge {
    let resident_mb = e
        .machine
        .as_ref()
        .and_then(|m| m.resident_bytes())
        .map_or(0, |b| b.div_ceil(1 << 20));
    Charge {
        id: e.rec.id.clone(),
        charged_mb: resident_mb.max(e.rec.reserved_mb),
        last_used_at: e.rec.last_used_at.clone(),
        person_lock: e
            .lock
            .as_ref()
            .is_some_and(|l| l.holder.principal == Principal::Person),
        watchers: e.watchers,
    }
}

fn view_of(e: &Entry) -> RigView {
    let now = Utc::now();
    let open = e.rec.state.is_open();
    RigView {
        record: e.rec.clone(),
        lock: e.lock.clone(),
        ttl_left_secs: if open {
            parse_at(&e.rec.expires_at).map_or(0, |x| (x - now).num_seconds().max(0) as u64)
        } else {
            0
        },
        idle_secs_now: if open {
            secs_between(&e.rec.last_used_at, now)
        } else {
            0
        },
        resident_bytes: if open {
            e.machine.as_ref().and_then(|m| m.resident_bytes())
        } else {
            None
        },
        watchers: e.watchers,
        audit_next: e.audit.next_seq(),
    }
}

fn not_found(id: &str) -> RigError {
    RigError::NotFound(format!(
        "no rig {}; `proctor rig list` shows them",
        crate::text::one_line(id, 100)
    ))
}

/// The value of [`OWNER_VAR`] in a process's environment, if it carries one.
fn owner_of(pid: u32) -> Option<String> {
    let env = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let key = format!("{OWNER_VAR}=");
    env.split(|&b| b == 0)
        .find_map(|kv| kv.strip_prefix(key.as_bytes()))
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

/// Ends an engine: its process group when it leads one, else the process.
fn kill_engine(pid: u32) {
    let leads = crate::runs::process::proc_stat(pid).is_some_and(|s| s.pgrp == pid as i32);
    let r = if leads {
        crate::process_group::signal_group(pid, libc::SIGKILL)
    } else {
        crate::process_group::signal_process(pid, libc::SIGKILL)
    };
    if let Err(e) = r {
        crate::log::log(&format!("rigs: the orphan {pid} could not be killed: {e}"));
    }
}

/// Reads the settings file (defaults when absent). A bad file is refused naming the file, the
/// key and the remedy.
pub fn load_settings(path: &std::path::Path) -> Result<Settings, RigError> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Settings::default()),
        Err(e) => return Err(RigError::Internal(format!("{}: {e}", path.display()))),
    };
    let remedy = "fix or remove it; its keys are memory_budget_mb, vm_memory_mb, \
                  namespace_floor_mb, ttl, idle";
    let s: Settings = toml::from_str(&text).map_err(|e| {
        RigError::BadRequest(format!(
            "{}: {}; {remedy}",
            path.display(),
            crate::text::one_line(e.message(), 300)
        ))
    })?;
    for (key, v) in [("ttl", &s.ttl), ("idle", &s.idle)] {
        parse_duration(v).map_err(|e| {
            RigError::BadRequest(format!("{}: {key}: {e}; {remedy}", path.display()))
        })?;
    }
    if s.vm_memory_mb < 64 {
        return Err(RigError::BadRequest(format!(
            "{}: vm_memory_mb = {} is under 64; {remedy}",
            path.display(),
            s.vm_memory_mb
        )));
    }
    Ok(s)
}

#[cfg(test)]
mod tests;
