//! `proctor demo`: the fakes' sessions in every state, each labelled demo.

mod common;
use common::TestHome;

#[test]
fn demo_sets_up_every_state_and_labels_every_run() {
    let h = TestHome::new();
    let v = h.json(&["demo", "--no-cockpit", "--json"]);
    let runs = v["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 6);
    assert!(runs.iter().all(|r| r["demo"] == true), "{v}");
    let state = |name: &str| {
        runs.iter().find(|r| r["name"] == name).unwrap()["state"]
            .as_str()
            .unwrap()
            .to_string()
    };
    assert_eq!(state("explain the failing test"), "idle");
    assert_eq!(state("release notes"), "stopped");
    assert_eq!(state("flaky network test"), "failed");
    let failed = runs
        .iter()
        .find(|r| r["name"] == "flaky network test")
        .unwrap();
    assert_eq!(failed["exit_code"], 3, "the exit code is the one observed");
    let stopped = runs.iter().find(|r| r["name"] == "release notes").unwrap();
    assert_eq!(stopped["exit_code"], 0);
    // The narrating sessions produce output at a human pace, in a terminal.
    let narrated = runs.iter().find(|r| r["tool"] == "claude").unwrap();
    assert_eq!(narrated["transport"], "pty");
    let r = narrated["ref"].as_str().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let out = h.ok(&["session", "tail", r]);
        if out.contains("Reading src/parser.rs") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no narration yet: {out}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    // One session works in a worktree: its candidate is bound and checked, the gate awaits a
    // person (never accepted), the receipts exist, and an intent awaits authority.
    let wt = runs
        .iter()
        .find(|r| r["name"] == proctor::demo::WORKTREE_SCENE)
        .unwrap();
    let r = wt["ref"].as_str().unwrap();
    assert_eq!(wt["worktree_branch"], format!("proctor/{r}"));
    let cands = h.json(&["candidate", "list", "--json"]);
    let cand = cands["items"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["run_ref"] == r)
        .unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let gate = h.json(&["gate", &cand, "--json"]);
    assert_eq!(gate["state"], "awaiting_human", "{gate}");
    let receipts = h.json(&["receipt", "list", "--json"]);
    let kinds: Vec<&str> = receipts["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["kind"].as_str())
        .collect();
    assert!(
        kinds.contains(&"candidate.bound") && kinds.contains(&"evidence.attempt"),
        "{receipts}"
    );
    let intents = h.json(&["publish", "list", "--json"]);
    assert_eq!(
        intents["items"][0]["state"], "awaiting_authority",
        "{intents}"
    );
    assert_eq!(intents["items"][0]["run"], r);
    // The candidate has a tribunal round in progress: some seats decided, two still asking
    // a slow and a silent juror; the builder's family refused before any send.
    // The demo returns once every other seat has decided or, on a loaded machine, after two
    // minutes with the round going on (CI once saw three seats pending then): the seats
    // that do not sit on the slow juror must still decide, and the round stay in progress.
    let pending = |r: &serde_json::Value| {
        r["seats"]
            .as_array()
            .map_or(0, |s| s.iter().filter(|s| s["state"] == "pending").count())
    };
    let started = std::time::Instant::now();
    let rounds = loop {
        let rounds = h.json(&["tribunal", "rounds", &cand, "--json"]);
        if pending(&rounds["items"][0]) <= 2 || started.elapsed().as_secs() > 180 {
            break rounds;
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    };
    let round = &rounds["items"][0];
    assert_eq!(round["state"], "in_progress", "{rounds}");
    assert_eq!(
        round["identity"]["digest"],
        cands["items"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == cand.as_str())
            .unwrap()["identity"]["digest"]
    );
    let seats = round["seats"].as_array().unwrap();
    assert_eq!(seats.len(), 8);
    assert_eq!(pending(round), 2, "{rounds:#}");
    assert!(seats.iter().any(|s| s["state"] == "pass"));
    let show = h.ok(&["tribunal", "show", round["id"].as_str().unwrap()]);
    assert!(show.contains("builder_family"), "{show}");
    // A second demo in the same home is refused: it is for fresh homes only.
    // The factory scene: one run through its one repair to an approval, one still at work,
    // both labelled demo.
    let f = h.json(&["factory", "list", "--json"]);
    let fr = f["items"].as_array().unwrap();
    assert_eq!(fr.len(), 2, "{f}");
    assert!(fr.iter().all(|r| r["demo"] == true), "{f}");
    assert_eq!(fr[0]["status"], "completed", "{f}");
    let roles: Vec<&str> = fr[0]["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["role"].as_str().unwrap())
        .collect();
    assert_eq!(roles, ["worker", "review-1", "repair", "review-2"], "{f}");
    assert_eq!(fr[1]["status"], "running", "{f}");
    assert_eq!(fr[1]["phase"], "worker", "{f}");
    let again = h.run(&["demo", "--no-cockpit"]);
    assert_eq!(again.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&again.stderr).contains("already holds proctor state"));
}

#[test]
fn demo_without_a_terminal_refuses_before_starting_anything() {
    let h = TestHome::new();
    let out = h
        .cmd()
        .arg("demo")
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--no-cockpit"));
    assert!(!h.path().join("data").exists(), "nothing was set up");
}
