//! Handler-level tests of the server's own checks (compiled for `cargo test --lib` only).
//!
//! The authority routes are gated by the kernel (`api::authorize` → `peer::authority_check`):
//! only the proctor binary, at a controlling terminal, in its foreground, outside the
//! server's tree reaches their handlers, and that binary never replays a spend, posts an
//! authorisation for another revision or a forged key change. The handlers' own checks
//! behind the gate are tested here: the real handlers and routers of `authority_api` and
//! `publish_api`, on the real state ([`Shared`]) of a temporary home, with the [`Caller`] the
//! gate would have set given by the test. Nothing here exists in the production server.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::body::Body;
use axum::extract::Extension;
use axum::http::{Method, Request};
use http_body_util::BodyExt;
use serde_json::Value;

use super::api::Caller;
use super::authority_api::{AuthoritySettings, AuthorityState};
use super::{Shared, authority_api, publish_api};
use crate::auth::{Principal, Role, Tokens};
use crate::home::Home;
use crate::ledger::Ledger;

/// A server's state on a temporary home, without a socket.
pub(crate) struct TestServer {
    pub dir: tempfile::TempDir,
    pub state: Arc<Shared>,
}

impl TestServer {
    pub fn new() -> TestServer {
        TestServer::with(AuthoritySettings::default())
    }

    pub fn with(authority: AuthoritySettings) -> TestServer {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::resolve_with(Some(&dir.path().join("home")), None).unwrap();
        home.ensure().unwrap();
        let (ledger, _) = Ledger::open(&home.ledger_path()).unwrap();
        let ledger = Arc::new(ledger);
        let tokens = Tokens::load(&home.tokens_path()).unwrap();
        let settings = crate::sessions::manager::Settings {
            cgroups: false,
            ..Default::default()
        };
        let sessions = crate::sessions::Sessions::open(&home, ledger.clone(), settings).unwrap();
        let workspaces = crate::workspaces::Store::new(&home);
        let rigs = crate::rigs::Rigs::new(
            home.clone(),
            ledger.clone(),
            std::path::PathBuf::from("proctor"),
        );
        let state = Arc::new(Shared {
            home,
            pid: std::process::id(),
            started_at: crate::ledger::now_at(),
            tokens: Mutex::new(tokens),
            ledger,
            sessions,
            me: crate::peer::ServerSelf::current(),
            authority: AuthorityState::new(authority),
            publish: super::publish_api::PublishState::default(),
            checks: Default::default(),
            workspaces,
            tribunal: Default::default(),
            factory: Default::default(),
            marks_changed: Default::default(),
            rigs,
            rig_engines: Default::default(),
            shutdown: tokio::sync::Notify::new(),
        });
        TestServer { dir, state }
    }

    /// Calls the authority and publish routes as `caller`, the kernel gate left out (the
    /// caller is what the gate would have let through); the status and the JSON answer.
    pub fn call(
        &self,
        caller: &Caller,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> (u16, Value) {
        let app = Router::new()
            .nest(authority_api::BASE, authority_api::routes())
            .nest(publish_api::BASE, publish_api::routes())
            .layer(Extension(caller.clone()))
            .with_state(self.state.clone());
        let req = Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", "application/json")
            .body(match body {
                Some(v) => Body::from(serde_json::to_vec(&v).unwrap()),
                None => Body::empty(),
            })
            .unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let mut app = app;
            let res = tower_service::Service::call(&mut app, req).await.unwrap();
            let status = res.status().as_u16();
            let bytes = res.into_body().collect().await.unwrap().to_bytes();
            let v = if bytes.is_empty() {
                Value::Null
            } else {
                serde_json::from_slice(&bytes)
                    .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()))
            };
            (status, v)
        })
    }

    /// Asserts the status and returns the answer.
    pub fn expect(
        &self,
        caller: &Caller,
        status: u16,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Value {
        let (code, v) = self.call(caller, method.clone(), path, body);
        assert_eq!(code, status, "{method} {path}: {v}");
        v
    }

    /// The ledger's events of `kind`.
    pub fn ledger(&self, kind: &str) -> Vec<Value> {
        std::fs::read_to_string(self.state.home.ledger_path())
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|e| e["kind"] == kind)
            .collect()
    }
}

/// A person's admin caller as the gate lets it through (the kernel's peer is irrelevant to
/// the handlers, which look at the principal and the token).
pub(crate) fn person() -> Caller {
    caller("tok-person", Principal::Person)
}

pub(crate) fn caller(token_id: &str, principal: Principal) -> Caller {
    Caller {
        token_id: token_id.into(),
        name: token_id.into(),
        role: Role::Admin,
        principal,
        token_principal: principal,
        peer: crate::peer::Peer::unknown(),
    }
}

/// Two servers for two homes in one process share nothing: each one's intents, their lock,
/// its workspace registry (lock and pending changes) and its evidence attempts in progress
/// are its own.
#[cfg(test)]
mod two_servers {
    use super::TestServer;
    use crate::publish::intent;

    fn an_intent() -> intent::Intent {
        let id = "0".repeat(40);
        serde_json::from_value(serde_json::json!({
            "format": intent::FORMAT, "id": "", "created_at": crate::ledger::now_at(),
            "proposed_by": "tok-person", "run": "run-0001",
            "candidate": {"id": "cand-0001", "digest": "d", "recipe": "r", "base": id,
                          "index_tree": id, "worktree_tree": id},
            "repo": "/nonexistent", "worktree": "/nonexistent",
            "remote": {"name": "origin", "url": "file:///nonexistent"},
            "branch": "proctor/run-0001", "expected_tip": null, "title": "t", "body": "",
            "commit": {"tree": id, "parent": id, "message": "t\n", "author_name": "A",
                       "author_email": "a@example.org", "date": "1700000000 +0000"},
            "revision": id,
            "forge": {"api_base": "http://127.0.0.1:1", "owner": "o", "repo": "r", "base": "main"},
            "state": "awaiting_authority", "causes": [], "gate": {},
        }))
        .unwrap()
    }

    #[test]
    fn intents_made_in_one_are_neither_seen_nor_locked_by_the_other() {
        let (a, b) = (TestServer::new(), TestServer::new());
        let (sa, sb) = (&a.state, &b.state);
        let made = intent::create(&sa.publish.intents, &sa.home, an_intent()).unwrap();
        assert_eq!(made.id, "int-0001");
        assert!(
            intent::list(&sb.home).unwrap().is_empty(),
            "B sees A's intent"
        );
        // While A's intent store is locked (inside its update), B creates and updates its
        // own: B's store is not A's (with one process-wide lock this would never return).
        intent::update(&sa.publish.intents, &sa.home, "int-0001", |i| {
            let other = intent::create(&sb.publish.intents, &sb.home, an_intent()).unwrap();
            assert_eq!(other.id, "int-0001", "B numbers its own intents");
            intent::update(&sb.publish.intents, &sb.home, "int-0001", |j| {
                j.title = "B's".into()
            })
            .unwrap();
            i.title = "A's".into();
        })
        .unwrap();
        assert_eq!(intent::load(&sa.home, "int-0001").unwrap().title, "A's");
        assert_eq!(intent::load(&sb.home, "int-0001").unwrap().title, "B's");
        assert_eq!(intent::list(&sa.home).unwrap().len(), 1);
        assert_eq!(intent::list(&sb.home).unwrap().len(), 1);
    }

    #[test]
    fn a_workspace_change_in_one_neither_shows_in_nor_waits_for_the_other() {
        use std::os::unix::fs::PermissionsExt;

        use crate::workspaces;
        let (a, b) = (TestServer::new(), TestServer::new());
        let (sa, sb) = (&a.state, &b.state);
        let by = super::person().actor();
        let folder = |t: &TestServer, name: &str| {
            let p = t.dir.path().join(name);
            std::fs::create_dir(&p).unwrap();
            p.to_str().unwrap().to_string()
        };
        let (fa, fb) = (folder(&a, "a"), folder(&b, "b"));
        // While A's registry is locked (inside a mutation), B registers a folder: B's store
        // is not A's (with one process-wide lock this would never return).
        sa.workspaces.with_lock(|| {
            let w = workspaces::add(&sb.workspaces, &sb.ledger, &by, &fb).unwrap();
            assert_eq!(w.ws_ref, "ws-0001", "B numbers its own workspaces");
        });
        assert!(
            sa.workspaces.load().unwrap().is_empty(),
            "A sees B's workspace"
        );
        // A's registry write fails after its ledger append (its data folder is no longer
        // private): the change is pending in A's store, which sees it; B's store does not,
        // and nor does the file.
        let data = &sa.home.data;
        std::fs::set_permissions(data, std::fs::Permissions::from_mode(0o770)).unwrap();
        assert!(workspaces::add(&sa.workspaces, &sa.ledger, &by, &fa).is_err());
        std::fs::set_permissions(data, std::fs::Permissions::from_mode(0o700)).unwrap();
        let in_a: Vec<_> = sa.workspaces.load().unwrap();
        assert_eq!(in_a.len(), 1, "A's store keeps what its ledger holds");
        assert_eq!(in_a[0].path.to_str(), Some(fa.as_str()));
        assert!(workspaces::load(&sa.home).unwrap().is_empty());
        let in_b = sb.workspaces.load().unwrap();
        assert_eq!(in_b.len(), 1);
        assert_eq!(
            in_b[0].path.to_str(),
            Some(fb.as_str()),
            "B sees A's pending change"
        );
        // A's next change writes what was pending, and only A's.
        let w = workspaces::set_setup(&sa.workspaces, &sa.ledger, &by, "ws-0001", "make").unwrap();
        assert_eq!(w.path.to_str(), Some(fa.as_str()));
        assert_eq!(workspaces::load(&sa.home).unwrap().len(), 1);
        assert_eq!(workspaces::load(&sb.home).unwrap(), in_b);
    }

    #[test]
    fn an_evidence_attempt_in_one_neither_shows_in_nor_blocks_the_other() {
        let (a, b) = (TestServer::new(), TestServer::new());
        let (sa, sb) = (&a.state, &b.state);
        let held = sa.checks.hold("cand-0001").unwrap();
        assert!(sa.checks.running("cand-0001").is_some());
        assert!(
            sa.checks.hold("cand-0001").is_err(),
            "A's second attempt waits for its first"
        );
        assert!(
            sb.checks.running("cand-0001").is_none(),
            "B sees A's attempt"
        );
        let other = sb
            .checks
            .hold("cand-0001")
            .expect("B is blocked by A's attempt");
        drop(held);
        assert!(sa.checks.running("cand-0001").is_none());
        assert!(sb.checks.running("cand-0001").is_some());
        drop(other);
    }
}
