use super::*;
use crate::rigs::model::{Kind, TypeRequest};
use std::os::unix::process::CommandExt;

fn actor(tok: &str, p: Principal) -> Actor {
    Actor {
        token_id: tok.into(),
        name: tok.replace("tok-", "n"),
        principal: p,
    }
}

fn person(tok: &str) -> Actor {
    actor(tok, Principal::Person)
}
fn agent(tok: &str) -> Actor {
    actor(tok, Principal::Agent)
}

fn typed() -> Action {
    Action::Type(TypeRequest {
        text: Some("ls\r".into()),
        data_b64: None,
        paste: false,
    })
}

#[test]
fn a_persons_lock_refuses_an_agents_mutation_and_lets_observation_through() {
    let lock = Lock {
        holder: person("tok-p1"),
        since: "2026-01-01T00:00:00.000Z".into(),
    };
    let e = check_lock("rig-0001", Some(&lock), &agent("tok-a1"), &typed()).unwrap_err();
    match &e {
        RigError::Locked {
            holder, message, ..
        } => {
            assert_eq!(holder.token_id, "tok-p1");
            assert_eq!(
                message,
                "rig-0001 is locked by np1 (tok-p1), a person, since 2026-01-01T00:00:00.000Z: \
                 observation (screen, cp out, audit) still works; ask them to run `proctor rig \
                 unlock rig-0001`"
            );
        }
        other => panic!("{other:?}"),
    }
    for a in [Action::Close, Action::Suspend, Action::Fetch] {
        assert!(matches!(
            check_lock("rig-0001", Some(&lock), &agent("tok-a1"), &a),
            Err(RigError::Locked { .. })
        ));
    }
    for a in [
        Action::Screen,
        Action::GetFile {
            path: "/etc/hostname".into(),
        },
    ] {
        assert_eq!(
            check_lock("rig-0001", Some(&lock), &agent("tok-a1"), &a).unwrap(),
            LockEffect::Keep
        );
    }
    // The holder acts; with no lock, an agent acts.
    assert_eq!(
        check_lock("rig-0001", Some(&lock), &person("tok-p1"), &typed()).unwrap(),
        LockEffect::Keep
    );
    assert_eq!(
        check_lock("rig-0001", None, &agent("tok-a1"), &typed()).unwrap(),
        LockEffect::Keep
    );
}

#[test]
fn only_a_person_takes_the_lock_and_only_its_holder_releases_it() {
    assert!(matches!(
        check_lock("rig-0001", None, &agent("tok-a1"), &Action::Lock),
        Err(RigError::Forbidden(_))
    ));
    assert_eq!(
        check_lock("rig-0001", None, &person("tok-p1"), &Action::Lock).unwrap(),
        LockEffect::Take
    );
    let lock = Lock {
        holder: person("tok-p1"),
        since: "2026-01-01T00:00:00.000Z".into(),
    };
    assert_eq!(
        check_lock("rig-0001", Some(&lock), &person("tok-p1"), &Action::Lock).unwrap(),
        LockEffect::Keep
    );
    assert!(matches!(
        check_lock("rig-0001", Some(&lock), &person("tok-p2"), &Action::Lock),
        Err(RigError::Locked { .. })
    ));
    assert!(matches!(
        check_lock("rig-0001", Some(&lock), &person("tok-p2"), &Action::Unlock),
        Err(RigError::Forbidden(_))
    ));
    assert!(matches!(
        check_lock("rig-0001", Some(&lock), &agent("tok-a1"), &Action::Unlock),
        Err(RigError::Forbidden(_))
    ));
    assert_eq!(
        check_lock("rig-0001", Some(&lock), &person("tok-p1"), &Action::Unlock).unwrap(),
        LockEffect::Release
    );
    // The holder's own token in an agent's hands (the kernel says agent: a process the
    // server started read it) is not the holder: it neither acts nor releases.
    assert!(matches!(
        check_lock("rig-0001", Some(&lock), &agent("tok-p1"), &typed()),
        Err(RigError::Locked { .. })
    ));
    assert!(matches!(
        check_lock("rig-0001", Some(&lock), &agent("tok-p1"), &Action::Unlock),
        Err(RigError::Forbidden(_))
    ));
    // Exclusive: another person's typing is refused too.
    assert!(matches!(
        check_lock("rig-0001", Some(&lock), &person("tok-p2"), &typed()),
        Err(RigError::Locked { .. })
    ));
}

fn ch(id: &str, mb: u64, used: &str, person_lock: bool, watchers: u32) -> Charge {
    Charge {
        id: id.into(),
        charged_mb: mb,
        last_used_at: format!("2026-01-01T00:00:{used}.000Z"),
        person_lock,
        watchers,
    }
}

#[test]
fn eviction_takes_the_least_recently_used_and_never_a_locked_or_watched_rig() {
    let charges = [
        ch("rig-0001", 320, "05", false, 0),
        ch("rig-0002", 320, "01", true, 0), // oldest, but a person holds it
        ch("rig-0003", 320, "02", false, 1), // watched
        ch("rig-0004", 320, "03", false, 0),
        ch("rig-0005", 320, "04", false, 0),
    ];
    // 1600 used; 320 more in 1280 needs two closed: 0004 then 0005.
    assert_eq!(
        evict_order(&charges, 320, 1280).unwrap(),
        vec!["rig-0004".to_string(), "rig-0005".to_string()]
    );
    assert_eq!(
        evict_order(&charges, 320, 1920).unwrap(),
        Vec::<String>::new()
    );
    // Closing every candidate still leaves 640 + 320 > 900.
    let e = evict_order(&charges, 320, 900).unwrap_err();
    assert!(
        e.contains("900 MB") && e.contains("1600 MB") && e.contains("memory_budget_mb"),
        "{e}"
    );
}

fn rec(state: RigState, expires: &str, last_used: &str, idle: u64) -> RigRecord {
    RigRecord {
        id: "rig-0001".into(),
        kind: Kind::Terminal,
        backend: BackendKind::Namespace,
        boundary: None,
        state,
        opened_by: person("tok-p1"),
        opened_at: "2026-01-01T00:00:00.000Z".into(),
        ttl_secs: 100,
        expires_at: expires.into(),
        idle_secs: idle,
        last_used_at: last_used.into(),
        allow: vec![],
        workspace: None,
        image: None,
        reserved_mb: 32,
        pid: None,
        pid_start: None,
        closed_at: None,
        close_reason: None,
        error: None,
    }
}

#[test]
fn the_ttl_is_hard_and_the_idle_ladder_suspends_then_closes() {
    let at = |s: &str| parse_at(s).unwrap();
    let exp = "2026-01-01T00:01:40.000Z";
    let used = "2026-01-01T00:00:00.000Z";
    let r = rec(RigState::Running, exp, used, 10);
    assert_eq!(
        tick_decision(&r, 0, at("2026-01-01T00:00:09.000Z")),
        TickStep::Nothing
    );
    assert_eq!(
        tick_decision(&r, 0, at("2026-01-01T00:00:10.000Z")),
        TickStep::Suspend
    );
    assert_eq!(
        tick_decision(&r, 1, at("2026-01-01T00:00:15.000Z")),
        TickStep::Touch
    );
    let s = rec(RigState::Suspended, exp, used, 10);
    assert_eq!(
        tick_decision(&s, 0, at("2026-01-01T00:00:15.000Z")),
        TickStep::Nothing
    );
    assert_eq!(
        tick_decision(&s, 0, at("2026-01-01T00:00:20.000Z")),
        TickStep::Close(CloseReason::Idle)
    );
    // A tick missed for a long time still closes (any rate is correct).
    assert_eq!(
        tick_decision(&r, 0, at("2026-01-01T00:00:50.000Z")),
        TickStep::Close(CloseReason::Idle)
    );
    // The TTL closes even a watched rig, and a booting one.
    assert_eq!(
        tick_decision(&r, 3, at(exp)),
        TickStep::Close(CloseReason::TtlExpired)
    );
    let b = rec(RigState::Booting, exp, used, 10);
    assert_eq!(
        tick_decision(&b, 0, at("2026-01-01T00:00:50.000Z")),
        TickStep::Nothing
    );
    assert_eq!(
        tick_decision(&b, 0, at(exp)),
        TickStep::Close(CloseReason::TtlExpired)
    );
    let c = rec(RigState::Closed, exp, used, 10);
    assert_eq!(tick_decision(&c, 0, at(exp)), TickStep::Nothing);
}

#[test]
fn settings_default_when_absent_and_a_bad_file_is_refused_by_name() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("rigs.toml");
    assert_eq!(load_settings(&p).unwrap(), Settings::default());
    std::fs::write(&p, "memory_budget_mb = 512\nttl = \"4s\"\nidle = \"2s\"\n").unwrap();
    let s = load_settings(&p).unwrap();
    assert_eq!(
        (s.memory_budget_mb, s.ttl.as_str(), s.vm_memory_mb),
        (512, "4s", 256)
    );
    std::fs::write(&p, "memory_budget = 512\n").unwrap();
    let e = load_settings(&p).unwrap_err().to_string();
    assert!(
        e.contains("rigs.toml") && e.contains("memory_budget") && e.contains("fix or remove"),
        "{e}"
    );
    std::fs::write(&p, "ttl = \"forever\"\n").unwrap();
    let e = load_settings(&p).unwrap_err().to_string();
    assert!(
        e.contains("rigs.toml") && e.contains("ttl") && e.contains("\"forever\""),
        "{e}"
    );
}

#[test]
fn the_home_tag_is_16_hex_of_the_data_path() {
    let t = tempfile::tempdir().unwrap();
    let home = Home::resolve_with(Some(t.path()), None).unwrap();
    let tag = home_tag(&home);
    assert_eq!(tag.len(), 16);
    assert!(tag.bytes().all(|b| b.is_ascii_hexdigit()));
    use sha2::{Digest, Sha256};
    let want = hex::encode(Sha256::digest(home.data.as_os_str().as_encoded_bytes()));
    assert_eq!(tag, want[..16]);
}

#[test]
fn the_audit_detail_records_sizes_never_content() {
    let d = audit_detail(&Action::Type(TypeRequest {
        text: Some("hunter2 my password".into()),
        data_b64: None,
        paste: true,
    }));
    assert_eq!(d, json!({"bytes": 19, "paste": true}));
    let d = audit_detail(&Action::PutFile {
        path: "/work/x".into(),
        bytes: b"secret".to_vec(),
        mode: 0o644,
    });
    assert_eq!(d, json!({"path": "/work/x", "bytes": 6, "mode": "644"}));
    assert!(!d.to_string().contains("secret"));
}

#[test]
fn a_record_left_open_by_a_dead_server_is_swept_closed() {
    let t = tempfile::tempdir().unwrap();
    let home = Home::resolve_with(Some(t.path()), None).unwrap();
    home.ensure().unwrap();
    let (ledger, _) = Ledger::open(&home.ledger_path()).unwrap();
    let (id, _) = store::reserve(&home).unwrap();
    let mut r = rec(
        RigState::Running,
        "2099-01-01T00:00:00.000Z",
        "2026-01-01T00:00:00.000Z",
        10,
    );
    r.id = id.clone();
    // A live process that is not ours (no owner tag): never killed, the record still closes.
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    r.pid = Some(child.id());
    r.pid_start = crate::runs::process::process_identity(child.id());
    store::save(&home, &r).unwrap();
    let rigs = Rigs::new(home.clone(), Arc::new(ledger), PathBuf::from("/bin/false"));
    assert_eq!(rigs.sweep_orphans(), vec![id.clone()]);
    assert!(
        child.try_wait().unwrap().is_none(),
        "an untagged process was killed"
    );
    let v = rigs.show(&id).unwrap();
    assert_eq!(v.record.state, RigState::Closed);
    assert_eq!(v.record.close_reason, Some(CloseReason::OrphanSwept));
    assert_eq!(
        store::load(&home, &id).unwrap().unwrap().state,
        RigState::Closed
    );
    let _ = child.kill();
    let _ = child.wait();
    // Acting on it is a conflict, and on nothing a 404.
    assert!(matches!(
        rigs.act(&person("tok-p1"), &id, Action::Screen),
        Err(RigError::Conflict(_))
    ));
    assert!(matches!(
        rigs.act(&person("tok-p1"), "rig-9999", Action::Screen),
        Err(RigError::NotFound(_))
    ));
}

#[test]
fn the_sweep_kills_a_process_carrying_this_homes_tag() {
    let t = tempfile::tempdir().unwrap();
    let home = Home::resolve_with(Some(t.path()), None).unwrap();
    home.ensure().unwrap();
    let (ledger, _) = Ledger::open(&home.ledger_path()).unwrap();
    let (id, _) = store::reserve(&home).unwrap();
    let tag = format!("{}/{id}", home_tag(&home));
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .env(OWNER_VAR, &tag)
        .process_group(0)
        .spawn()
        .unwrap();
    let mut r = rec(
        RigState::Running,
        "2099-01-01T00:00:00.000Z",
        "2026-01-01T00:00:00.000Z",
        10,
    );
    r.id = id.clone();
    r.pid = Some(child.id());
    r.pid_start = crate::runs::process::process_identity(child.id());
    store::save(&home, &r).unwrap();
    let rigs = Rigs::new(home.clone(), Arc::new(ledger), PathBuf::from("/bin/false"));
    assert_eq!(rigs.sweep_orphans(), vec![id.clone()]);
    let st = child.wait().unwrap();
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(st.signal(), Some(libc::SIGKILL));
    let tail = std::fs::read_to_string(home.ledger_path()).unwrap();
    assert!(tail.contains("rig.swept"), "{tail}");
}
