use std::os::unix::fs::symlink;
use std::path::Path;

use super::*;

const CLAUDE_REAL: &[u8] =
    include_bytes!("../../../tests/data/real/records/claude-2.1.332-turn-no-login.jsonl");
const CODEX_REAL: &[u8] =
    include_bytes!("../../../tests/data/real/records/codex-0.171.0-turn-offline.jsonl");
const CLAUDE_PUBLISHED: &[u8] =
    include_bytes!("../../../tests/data/records/claude-published.jsonl");
const CODEX_PUBLISHED: &[u8] = include_bytes!("../../../tests/data/records/codex-published.jsonl");
const GEMINI_REAL: &[u8] =
    include_bytes!("../../../tests/data/real/records/gemini-0.61.0-acp-stub-model.jsonl");
const GEMINI_REAL_ID: &str = "02abc005-f27a-4935-ae29-32f62e4a2f85";
const GEMINI_PUBLISHED: &[u8] =
    include_bytes!("../../../tests/data/records/gemini-published.jsonl");
const GEMINI_LEGACY: &[u8] =
    include_bytes!("../../../tests/data/records/gemini-legacy-published.json");
const OPENCODE_REAL: &[u8] =
    include_bytes!("../../../tests/data/real/records/opencode-1.18.33-export-offline.json");
const OPENCODE_PUBLISHED: &[u8] =
    include_bytes!("../../../tests/data/records/opencode-activity-published.json");

fn roles_texts(m: &[Message]) -> Vec<(Role, &str)> {
    m.iter().map(|m| (m.role, m.text.as_str())).collect()
}

#[test]
fn claudes_recorded_transcript_has_the_person_and_the_synthetic_answer() {
    let m = claude::messages(CLAUDE_REAL);
    assert_eq!(
        roles_texts(&m),
        [
            (Role::User, "say hi"),
            (Role::Assistant, "Not logged in · Please run /login")
        ]
    );
    assert_eq!(m[0].at.as_deref(), Some("2026-12-03T13:40:18.455Z"));
}

#[test]
fn claudes_published_shapes_keep_text_and_skip_tools_sidechains_and_meta() {
    let m = claude::messages(CLAUDE_PUBLISHED);
    assert_eq!(
        roles_texts(&m),
        [
            (Role::User, "Fix the parser bug\nin src/parse.rs"),
            (Role::Assistant, "I will read the file."),
            (Role::Assistant, "Fixed: the loop now stops at the end."),
            (Role::User, "fix the parser bug"),
        ]
    );
}

#[test]
fn codexs_recorded_rollout_has_the_persons_turn_once() {
    // The rollout also carries the user's text as a `response_item` and the context codex
    // adds as user items: only the `item_completed` event is a message.
    let m = codex::messages(CODEX_REAL);
    assert_eq!(roles_texts(&m), [(Role::User, "say hi")]);
    assert_eq!(m[0].at.as_deref(), Some("2026-12-03T13:39:56.239Z"));
}

#[test]
fn codexs_earlier_events_are_read_when_no_item_is_there() {
    let m = codex::messages(CODEX_PUBLISHED);
    assert_eq!(
        roles_texts(&m),
        [
            (Role::User, "what is 2+2? just give me the answer"),
            (Role::Assistant, "4"),
            (Role::User, "And 3+3?"),
            (Role::Assistant, "6"),
        ]
    );
}

#[test]
fn a_torn_last_line_is_skipped_and_counted_once_it_is_whole() {
    let whole = CLAUDE_PUBLISHED;
    let n = claude::messages(whole).len();
    let torn = [
        whole,
        &br#"{"type":"user","message":{"role":"user","content":"la"#[..],
    ]
    .concat();
    assert_eq!(claude::messages(&torn).len(), n);
    let grown = [
        whole,
        &br#"{"type":"user","message":{"role":"user","content":"later"},"timestamp":"2026-01-20T12:00:00Z"}"#[..],
        b"\n",
    ]
    .concat();
    let m = claude::messages(&grown);
    assert_eq!(m.len(), n + 1);
    // Every earlier message keeps its position.
    assert_eq!(m[..n], claude::messages(whole)[..]);
}

fn write(path: &Path, bytes: &[u8]) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, bytes).unwrap();
}

fn target<'a>(tool: Tool, home: &'a Path, cwd: &'a Path, id: &'a str, live: bool) -> Target<'a> {
    Target {
        tool,
        home,
        cwd,
        conversation_id: Some(id),
        live,
        exporter: None,
    }
}

#[test]
fn a_claude_record_is_read_at_its_place_and_states_follow_what_is_there() {
    let t = tempfile::tempdir().unwrap();
    let (home, cwd) = (t.path().join("h"), Path::new("/w/my.proj"));
    let tg = target(Tool::Claude, &home, cwd, "s-1", false);
    // Ended, conversation known, no file: missing. Live: pending. No id: pending.
    assert_eq!(
        messages(&tg, &mut Budget::default()).unwrap().state,
        TranscriptState::Missing
    );
    let live = target(Tool::Claude, &home, cwd, "s-1", true);
    assert_eq!(
        messages(&live, &mut Budget::default()).unwrap().state,
        TranscriptState::Pending
    );
    let no_id = Target {
        conversation_id: None,
        ..tg.clone()
    };
    assert_eq!(
        messages(&no_id, &mut Budget::default()).unwrap().state,
        TranscriptState::Pending
    );
    let p = home.join("projects/-w-my-proj/s-1.jsonl");
    write(&p, CLAUDE_PUBLISHED);
    let r = messages(&tg, &mut Budget::default()).unwrap();
    assert_eq!(r.state, TranscriptState::Read);
    assert_eq!(r.path.as_deref(), Some(p.as_path()));
    assert_eq!(r.messages.len(), 4);
}

#[test]
fn a_codex_rollout_is_found_by_its_thread_id() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path();
    let id = "01a23c22-1315-7172-a5a7-0c735ed0f285";
    write(
        &home.join(format!(
            "sessions/2026/12/03/rollout-2026-12-03T13-39-55-{id}.jsonl"
        )),
        CODEX_REAL,
    );
    let r = messages(
        &target(Tool::Codex, home, Path::new("/w"), id, false),
        &mut Budget::default(),
    )
    .unwrap();
    assert_eq!(r.state, TranscriptState::Read);
    assert_eq!(r.messages.len(), 1);
    let other = messages(
        &target(Tool::Codex, home, Path::new("/w"), "0000", false),
        &mut Budget::default(),
    )
    .unwrap();
    assert_eq!(other.state, TranscriptState::Missing);
}

#[test]
fn tools_without_a_reader_are_unsupported() {
    let t = tempfile::tempdir().unwrap();
    assert!(
        messages(
            &target(Tool::Grok, t.path(), Path::new("/w"), "x", false),
            &mut Budget::default()
        )
        .is_err()
    );
    assert!(!has_messages(Tool::Grok));
    for tool in [Tool::Claude, Tool::Codex, Tool::Gemini, Tool::Opencode] {
        assert!(has_messages(tool), "{tool}");
    }
}

fn unreadable(home: &Path, id: &str) -> String {
    let r = messages(
        &target(Tool::Claude, home, Path::new("/w"), id, false),
        &mut Budget::default(),
    )
    .unwrap();
    assert_eq!(r.state, TranscriptState::Unreadable, "{r:?}");
    assert!(r.messages.is_empty());
    r.reason.unwrap()
}

#[test]
fn symlinks_hard_links_fifos_and_large_files_are_unreadable_never_empty() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join("h");
    let dir = home.join("projects/-w");
    std::fs::create_dir_all(&dir).unwrap();
    let outside = t.path().join("secret.jsonl");
    write(&outside, CLAUDE_PUBLISHED);

    symlink(&outside, dir.join("link.jsonl")).unwrap();
    assert!(unreadable(&home, "link").contains("symbolic link"));

    std::fs::hard_link(&outside, dir.join("hard.jsonl")).unwrap();
    assert!(unreadable(&home, "hard").contains("2 names"));

    let fifo = dir.join("fifo.jsonl");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    // Opening it does not wait for a writer, and it is refused.
    assert!(unreadable(&home, "fifo").contains("not a regular file"));

    let big = dir.join("big.jsonl");
    let line = b"{\"type\":\"user\",\"message\":{\"role\":\"user\",\"content\":\"x\"}}\n";
    let mut bytes = Vec::new();
    while bytes.len() < 9 * 1024 * 1024 {
        bytes.extend_from_slice(line);
    }
    write(&big, &bytes);
    assert!(unreadable(&home, "big").contains("more than the 8388608 bytes"));

    // A symlinked folder on the way is refused too.
    let elsewhere = t.path().join("elsewhere");
    write(&elsewhere.join("s.jsonl"), CLAUDE_PUBLISHED);
    std::fs::create_dir_all(home.join("projects")).unwrap();
    symlink(&elsewhere, home.join("projects/-x")).unwrap();
    let r = messages(
        &target(Tool::Claude, &home, Path::new("/x"), "s", false),
        &mut Budget::default(),
    )
    .unwrap();
    assert_eq!(r.state, TranscriptState::Unreadable);
    assert!(r.reason.unwrap().contains("symbolic link"));
}

#[test]
fn a_request_reads_at_most_its_budget() {
    let t = tempfile::tempdir().unwrap();
    let p = t.path().join("a.jsonl");
    write(&p, CLAUDE_PUBLISHED);
    let mut b = Budget::new(CLAUDE_PUBLISHED.len() as u64);
    assert!(read_file(t.path(), &p, &mut b).unwrap().is_some());
    let e = read_file(t.path(), &p, &mut b).unwrap_err();
    assert!(matches!(e, RecordError::RequestTooLarge { .. }), "{e}");
    // The bound named is this request's own, not the default's.
    let own = format!("the {} bytes one request", CLAUDE_PUBLISHED.len());
    assert!(e.to_string().contains(&own), "{e}");
}

#[test]
fn a_compressed_codex_rollout_is_read_and_bounded_once_decompressed() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path();
    let id = "01a23c22-1315-7172-a5a7-0c735ed0f285";
    let dir = home.join("sessions/2026/12/03");
    write(
        &dir.join(format!("rollout-2026-12-03T13-39-55-{id}.jsonl.zst")),
        &zstd::encode_all(CODEX_PUBLISHED, 3).unwrap(),
    );
    let tg = target(Tool::Codex, home, Path::new("/w"), id, false);
    let r = messages(&tg, &mut Budget::default()).unwrap();
    assert_eq!(r.state, TranscriptState::Read, "{r:?}");
    assert_eq!(r.messages.len(), 4);
    // 9 MiB once decompressed (a few KiB on disk): refused.
    let line =
        b"{\"type\":\"event_msg\",\"payload\":{\"type\":\"agent_message\",\"message\":\"x\"}}\n";
    let mut big = Vec::new();
    while big.len() < 9 * 1024 * 1024 {
        big.extend_from_slice(line);
    }
    let other = "01a23c22-0000-7172-a5a7-0c735ed0f285";
    let packed = zstd::encode_all(&big[..], 3).unwrap();
    assert!(packed.len() < 1024 * 1024);
    write(
        &dir.join(format!("rollout-2026-12-03T13-39-55-{other}.jsonl.zst")),
        &packed,
    );
    let r = messages(
        &target(Tool::Codex, home, Path::new("/w"), other, false),
        &mut Budget::default(),
    )
    .unwrap();
    assert_eq!(r.state, TranscriptState::Unreadable);
    assert!(r.reason.unwrap().contains("more than the 8388608 bytes"));
    // Not zstd at all: unreadable, not empty.
    let bad = "01a23c22-ffff-7172-a5a7-0c735ed0f285";
    write(
        &dir.join(format!("rollout-2026-12-03T13-39-55-{bad}.jsonl.zst")),
        b"not zstd",
    );
    let r = messages(
        &target(Tool::Codex, home, Path::new("/w"), bad, false),
        &mut Budget::default(),
    )
    .unwrap();
    assert_eq!(r.state, TranscriptState::Unreadable);
}

const CLAUDE_ACTIVITY: &[u8] =
    include_bytes!("../../../tests/data/records/claude-activity-published.jsonl");
const CLAUDE_SUBAGENT: &[u8] =
    include_bytes!("../../../tests/data/records/claude-subagent-published.jsonl");
const CODEX_ACTIVITY: &[u8] =
    include_bytes!("../../../tests/data/records/codex-activity-published.jsonl");

fn task_states(a: &activity::Activity) -> Vec<(&str, Option<&str>, activity::WorkState)> {
    a.tasks
        .iter()
        .map(|t| (t.tool.as_str(), t.command.as_deref(), t.state))
        .collect()
}

#[test]
fn claudes_activity_in_the_published_shapes() {
    use activity::WorkState::*;
    let a = activity::claude(CLAUDE_ACTIVITY, false, &|id| id == "a1b2c3d4");
    assert_eq!(a.agents.len(), 1);
    let ag = &a.agents[0];
    assert_eq!(
        (
            ag.id.as_str(),
            ag.description.as_deref(),
            ag.kind.as_deref()
        ),
        ("a1b2c3d4", Some("Review the fix"), Some("code-reviewer"))
    );
    assert_eq!((ag.state, ag.transcript), (Completed, true));
    assert_eq!(
        task_states(&a),
        [
            ("Bash", Some("cargo test --lib"), Failed),
            ("Bash", Some("npm run dev"), Stopped),
            ("Bash", Some("sleep 100"), Stopped),
            ("Grep", Some("fn parse"), Stopped),
        ]
    );
    assert!(a.tasks[1].background);
    let files: Vec<_> = a
        .files
        .iter()
        .map(|f| (f.path.as_str(), f.added, f.removed, f.created))
        .collect();
    assert_eq!(
        files,
        [
            ("/w/src/parse.rs", Some(2), Some(1), false),
            ("/w/tests/parse.rs", Some(4), Some(0), true),
        ]
    );
    let todos: Vec<_> = a
        .todos
        .iter()
        .map(|t| (t.content.as_str(), t.status.as_str()))
        .collect();
    assert_eq!(
        todos,
        [("Fix the parser", "in_progress"), ("Add a test", "pending")]
    );
    assert_eq!(a.skills, ["pdf"]);
    assert_eq!(
        (a.mcp_servers[0].name.as_str(), a.mcp_servers[0].calls),
        ("github", 1)
    );
    // The main thread's model and its LAST request's context (3 + 40 + 12600), never the
    // sum over the session, nor the sidechain line's.
    assert_eq!(a.model.as_deref(), Some("claude-sonnet-4-5-20250929"));
    assert_eq!(a.context_tokens, Some(12_643));
    assert_eq!(a.context_window, None);
    assert_eq!(a.compactions, 1);
    // While the run is live, what has no result yet (and the background server) runs.
    let live = activity::claude(CLAUDE_ACTIVITY, true, &|_| false);
    assert_eq!(live.tasks[1].state, Running);
    assert_eq!(live.tasks[3].state, Running);
    assert!(!live.agents[0].transcript);
}

#[test]
fn a_claude_sub_agents_transcript_is_its_turns() {
    let t = claude::agent_turns(CLAUDE_SUBAGENT);
    assert_eq!(
        roles_texts(&t),
        [
            (Role::User, "Review src/parse.rs"),
            (Role::Assistant, "Reading it."),
            (Role::Assistant, "The fix looks right."),
        ]
    );
    // The main transcript's reader never shows them.
    assert!(claude::messages(CLAUDE_SUBAGENT).is_empty());
}

#[test]
fn agent_ids_that_could_leave_the_subagents_folder_name_no_file() {
    let (home, cwd) = (Path::new("/h"), Path::new("/w"));
    for bad in ["../x", "..", "a/b", "", "a\0b", "x.jsonl", &"a".repeat(129)] {
        assert!(claude::agent_path(home, cwd, "s", bad).is_none(), "{bad:?}");
    }
    let p = claude::agent_path(home, cwd, "s", "a1b2-c_3").unwrap();
    assert_eq!(
        p,
        Path::new("/h/projects/-w/s/subagents/agent-a1b2-c_3.jsonl")
    );
}

#[test]
fn codexs_activity_in_the_published_shapes() {
    use activity::WorkState::*;
    let a = activity::codex(CODEX_ACTIVITY, false);
    assert_eq!(a.model.as_deref(), Some("gpt-5-codex"));
    assert_eq!(
        task_states(&a),
        [
            ("shell", Some("cargo test --lib"), Failed),
            ("shell", Some("cargo test --lib"), Completed),
            ("exec_command", Some("tail -f log"), Stopped),
        ]
    );
    assert_eq!(
        a.tasks.iter().map(|t| t.exit_code).collect::<Vec<_>>(),
        [Some(101), Some(0), None]
    );
    let files: Vec<_> = a
        .files
        .iter()
        .map(|f| (f.path.as_str(), f.added, f.removed, f.created))
        .collect();
    assert_eq!(
        files,
        [
            ("src/parse.rs", Some(2), Some(1), false),
            ("tests/parse.rs", Some(2), Some(0), true),
        ]
    );
    assert_eq!(a.todos.len(), 2);
    assert_eq!(a.todos[1].content, "Run the tests");
    assert_eq!(a.mcp_servers[0].name, "docs");
    let agents: Vec<_> = a
        .agents
        .iter()
        .map(|g| (g.id.as_str(), g.description.as_deref(), g.state))
        .collect();
    assert_eq!(
        agents,
        [
            ("0199a213-child-0001", Some("Check the docs"), Completed),
            ("0199a213-child-0002", Some("Lint"), Failed),
        ]
    );
    // The last request's tokens (3100), not the cumulative 20900.
    assert_eq!(
        (a.context_tokens, a.context_window),
        (Some(3100), Some(272_000))
    );
    assert_eq!(a.compactions, 1);
    assert_eq!(
        activity::codex(CODEX_ACTIVITY, true).tasks[2].state,
        Running
    );
}

#[test]
fn a_huge_record_keeps_the_newest_tasks_and_counts_the_rest() {
    let mut b = Vec::new();
    for i in 0..(activity::MAX_ITEMS + 20) {
        b.extend_from_slice(
            format!(
                r#"{{"type":"assistant","message":{{"content":[{{"type":"tool_use","id":"t{i}","name":"Bash","input":{{"command":"{}"}}}}]}}}}"#,
                "x".repeat(2000)
            )
            .as_bytes(),
        );
        b.push(b'\n');
    }
    let a = activity::claude(&b, false, &|_| false);
    assert_eq!(a.tasks.len(), activity::MAX_ITEMS);
    assert_eq!(a.tasks_omitted, 20);
    assert_eq!(a.tasks[0].id, "t20");
    assert!(a.tasks[0].command.as_ref().unwrap().len() <= activity::MAX_FIELD);
}

#[test]
fn claudes_window_is_its_result_frames_report_for_the_transcripts_model_only() {
    let frames = br#"{"type":"system","subtype":"init","model":"m1"}
{"type":"result","modelUsage":{"m1":{"contextWindow":100000}}}
{"type":"result","modelUsage":{"m1":{"contextWindow":200000},"m2":{"contextWindow":1000000}}}
{"type":"result","subtype":"su"#;
    assert_eq!(
        activity::claude_reported_window(frames, Some("m1")),
        Some(200_000)
    );
    assert_eq!(
        activity::claude_reported_window(frames, Some("m2")),
        Some(1_000_000)
    );
    // Another model than the transcript's, or no model known: no report.
    assert_eq!(activity::claude_reported_window(frames, Some("m3")), None);
    assert_eq!(activity::claude_reported_window(frames, None), None);
    assert_eq!(activity::claude_reported_window(b"", Some("m1")), None);
}

// ---- Gemini CLI

#[test]
fn geminis_recorded_log_has_the_persons_turns_and_the_answers() {
    let m = gemini::messages(GEMINI_REAL);
    let got = roles_texts(&m);
    // The `<session_context>` gemini adds, the empty records that only carry tokens or tool
    // calls, and the functionResponse records are not messages.
    assert_eq!(
        got,
        [
            (Role::User, "first words\nsecond line"),
            (Role::Assistant, "stub answer: done"),
            (Role::User, "please list the folder"),
            (Role::Assistant, "stub answer: done"),
            (Role::User, "write a file"),
            (Role::Assistant, "stub answer: done"),
            (Role::User, "edit it"),
            (Role::Assistant, "stub answer: done"),
            (Role::User, "run a command"),
            (Role::Assistant, "stub answer: done"),
        ]
    );
    assert!(m.iter().all(|m| {
        m.at.as_deref()
            .is_some_and(|a| a.starts_with("2026-12-03T16:"))
    }));
}

#[test]
fn geminis_published_rules_replace_by_id_rewind_and_skip_what_gemini_skips() {
    let m = gemini::messages(GEMINI_PUBLISHED);
    assert_eq!(
        roles_texts(&m),
        [
            // Parts joined as gemini joins them; the info record, the /help command, the
            // thought part and the rewound turn are not there; the replaced g1 is in g1's
            // place; the error record and the torn line are not messages.
            (Role::User, "fix the bug"),
            (Role::Assistant, "Looking at it."),
            (Role::User, "now write it"),
            (Role::Assistant, "Done."),
        ]
    );
    let legacy = gemini::messages(GEMINI_LEGACY);
    assert_eq!(
        roles_texts(&legacy),
        [(Role::User, "hello"), (Role::Assistant, "hi there")]
    );
}

#[test]
fn geminis_recorded_activity_has_its_model_files_and_commands() {
    let a = activity::gemini(GEMINI_REAL, false);
    assert_eq!(a.model.as_deref(), Some("gemini-3.8-flash"));
    assert_eq!(a.context_tokens, Some(1234));
    assert_eq!(a.context_window, None);
    assert_eq!(
        task_states(&a),
        [
            ("list_directory", Some("."), activity::WorkState::Completed),
            (
                "run_shell_command",
                Some("echo hi; exit 3"),
                activity::WorkState::Failed
            ),
        ]
    );
    assert_eq!(a.tasks[1].exit_code, Some(3));
    // write_file created it with 2 lines, replace took 1 and added 2.
    assert_eq!(
        a.files,
        [activity::FileActivity {
            path: "/tmp/gem-try/ws/new.txt".into(),
            added: Some(4),
            removed: Some(1),
            created: true,
        }]
    );
}

#[test]
fn geminis_published_activity_todos_skills_and_states() {
    let a = activity::gemini(GEMINI_PUBLISHED, true);
    assert_eq!(
        a.model.as_deref(),
        Some("gemini-2.5-pro"),
        "the rewound flash is gone"
    );
    assert_eq!(a.context_tokens, Some(7000));
    assert_eq!(
        task_states(&a),
        [
            (
                "run_shell_command",
                Some("cargo test"),
                activity::WorkState::Completed
            ),
            ("read_file", Some("src/lib.rs"), activity::WorkState::Failed),
            (
                "run_shell_command",
                Some("false"),
                activity::WorkState::Failed
            ),
            // No status yet, the run is live.
            (
                "google_web_search",
                Some("rust borrow"),
                activity::WorkState::Running
            ),
        ]
    );
    // The cancelled replace changed nothing; the one the person edited has unknown counts.
    assert_eq!(
        a.files,
        [
            activity::FileActivity {
                path: "/w/new.rs".into(),
                added: Some(2),
                removed: Some(0),
                created: true,
            },
            activity::FileActivity {
                path: "/w/src/lib.rs".into(),
                added: None,
                removed: None,
                created: false,
            },
        ]
    );
    let todos: Vec<(&str, &str)> = a
        .todos
        .iter()
        .map(|t| (t.content.as_str(), t.status.as_str()))
        .collect();
    assert_eq!(
        todos,
        [
            ("read the code", "completed"),
            ("write the fix", "in_progress")
        ]
    );
    assert_eq!(a.skills, ["rust-review"]);
    let ended = activity::gemini(GEMINI_PUBLISHED, false);
    assert_eq!(ended.tasks[3].state, activity::WorkState::Stopped);
}

fn gemini_log(home: &Path, project: &str, name: &str, bytes: &[u8]) -> std::path::PathBuf {
    let p = home.join("tmp").join(project).join("chats").join(name);
    write(&p, bytes);
    p
}

#[test]
fn a_gemini_log_is_found_by_the_session_it_names_and_states_follow_what_is_there() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join(".gemini");
    let cwd = Path::new("/tmp/gem-try/ws");
    let tg = target(Tool::Gemini, &home, cwd, GEMINI_REAL_ID, false);
    // Nothing yet: missing once the run ended, pending while it is live.
    assert_eq!(
        messages(&tg, &mut Budget::default()).unwrap().state,
        TranscriptState::Missing
    );
    let live = Target {
        live: true,
        ..tg.clone()
    };
    assert_eq!(
        messages(&live, &mut Budget::default()).unwrap().state,
        TranscriptState::Pending
    );
    // Another session whose id shares the 8 first characters is not this one.
    let other = String::from_utf8_lossy(GEMINI_REAL)
        .replace(GEMINI_REAL_ID, "02abc005-0000-4000-8000-000000000000");
    gemini_log(
        &home,
        "ws",
        "session-2026-12-03T16-00-02abc005.jsonl",
        other.as_bytes(),
    );
    assert_eq!(
        messages(&tg, &mut Budget::default()).unwrap().state,
        TranscriptState::Missing
    );
    let p = gemini_log(
        &home,
        "ws-1",
        "session-2026-12-03T16-18-02abc005.jsonl",
        GEMINI_REAL,
    );
    let r = messages(&tg, &mut Budget::default()).unwrap();
    assert_eq!(
        (r.state, r.path.as_deref()),
        (TranscriptState::Read, Some(p.as_path()))
    );
    assert_eq!(r.messages.len(), 10);
    // An id that could not name a log names none.
    for bad in ["../../etc", "short", "02abc005/x", ""] {
        assert!(gemini::candidates(&home, bad).is_empty(), "{bad}");
    }
}

#[test]
fn a_symlinked_or_huge_gemini_log_is_unreadable_never_empty() {
    let t = tempfile::tempdir().unwrap();
    let home = t.path().join(".gemini");
    let tg = target(Tool::Gemini, &home, Path::new("/w"), GEMINI_REAL_ID, false);
    let outside = t.path().join("elsewhere.jsonl");
    write(&outside, GEMINI_REAL);
    let dir = home.join("tmp/ws/chats");
    std::fs::create_dir_all(&dir).unwrap();
    let link = dir.join("session-2026-12-03T16-18-02abc005.jsonl");
    symlink(&outside, &link).unwrap();
    let r = messages(&tg, &mut Budget::default()).unwrap();
    assert_eq!(r.state, TranscriptState::Unreadable, "{r:?}");
    assert!(r.messages.is_empty());
    assert!(r.reason.unwrap().contains("symbolic link"));
    std::fs::remove_file(&link).unwrap();
    let mut big = GEMINI_REAL.to_vec();
    while big.len() < 9 * 1024 * 1024 {
        big.extend_from_slice(b"{\"$set\":{\"lastUpdated\":\"2026-12-03T16:21:16.594Z\"}}\n");
    }
    write(&link, &big);
    let r = messages(&tg, &mut Budget::default()).unwrap();
    assert_eq!(r.state, TranscriptState::Unreadable);
    assert!(r.reason.unwrap().contains("more than the 8388608 bytes"));
}

// ---- OpenCode

#[test]
fn opencodes_recorded_export_has_the_persons_turns() {
    let m = opencode::messages(OPENCODE_REAL);
    // The two assistant messages that failed to reach a model have no text.
    assert_eq!(
        roles_texts(&m),
        [
            (Role::User, "first words\nsecond line"),
            (Role::User, "Second TURN"),
        ]
    );
    assert_eq!(m[0].at.as_deref(), Some("2026-12-03T16:02:49.830Z"));
    let a = activity::opencode(OPENCODE_REAL, false);
    assert_eq!(a.model.as_deref(), Some("opencode/big-pickle"));
    // No request reached the model: the context is unknown, not 0.
    assert_eq!(a.context_tokens, None);
    assert!(a.tasks.is_empty() && a.files.is_empty());
}

#[test]
fn opencodes_published_activity() {
    let m = opencode::messages(OPENCODE_PUBLISHED);
    assert_eq!(
        roles_texts(&m),
        [
            (Role::User, "fix the bug"),
            (Role::Assistant, "I will run the tests.")
        ]
    );
    let a = activity::opencode(OPENCODE_PUBLISHED, true);
    assert_eq!(a.model.as_deref(), Some("anthropic/claude-sonnet-4"));
    assert_eq!(
        a.context_tokens,
        Some(4700),
        "the last request that reached its model"
    );
    assert_eq!(a.compactions, 1);
    assert_eq!(
        task_states(&a),
        [
            ("bash", Some("cargo test"), activity::WorkState::Completed),
            ("bash", Some("false"), activity::WorkState::Failed),
            ("read", Some("/w/missing.rs"), activity::WorkState::Failed),
            (
                "webfetch",
                Some("https://example.com/doc"),
                activity::WorkState::Running
            ),
        ]
    );
    assert_eq!(a.tasks[1].exit_code, Some(1));
    assert_eq!(
        a.files,
        [
            activity::FileActivity {
                path: "/w/new.rs".into(),
                added: Some(3),
                removed: Some(0),
                created: true,
            },
            activity::FileActivity {
                path: "/w/src/lib.rs".into(),
                added: Some(2),
                removed: Some(1),
                created: false,
            },
        ]
    );
    assert_eq!(a.todos.len(), 2);
    assert_eq!(a.agents.len(), 1);
    assert_eq!(
        (
            a.agents[0].id.as_str(),
            a.agents[0].kind.as_deref(),
            a.agents[0].state
        ),
        ("ses_child1", Some("general"), activity::WorkState::Running)
    );
}

/// An executable script standing where `opencode` would be, that does what `body` says.
fn program(dir: &Path, body: &str) -> std::path::PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join("opencode");
    let _ = std::fs::remove_file(&p);
    std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o700)).unwrap();
    p
}

fn exporter(program: std::path::PathBuf, dir: &Path, secs: u64) -> opencode::Exporter {
    opencode::Exporter {
        program,
        env: vec![("PATH".into(), "/usr/bin:/bin".into())],
        dir: dir.to_path_buf(),
        deadline: std::time::Duration::from_secs(secs),
    }
}

fn export_state(x: &opencode::Exporter, live: bool) -> Raw {
    let t = tempfile::tempdir().unwrap();
    let tg = Target {
        exporter: Some(x),
        ..target(Tool::Opencode, t.path(), Path::new("/w"), "ses_abc", live)
    };
    raw(&tg, &mut Budget::default()).unwrap()
}

#[test]
fn opencode_export_is_run_once_and_what_it_says_is_the_state() {
    let t = tempfile::tempdir().unwrap();
    let log = t.path().join("argv");
    // What the real 1.18.33 prints for a session it has.
    let doc = t.path().join("doc.json");
    write(&doc, OPENCODE_REAL);
    let ok = program(
        t.path(),
        &format!(
            "echo \"$@\" >> {log}; env | grep -c OPENCODE_DISABLE_ >> {log}; echo 'Exporting session: '\"$3\" >&2; cat {doc}",
            log = log.display(),
            doc = doc.display()
        ),
    );
    let r = export_state(&exporter(ok, t.path(), 10), false);
    assert_eq!(r.state, TranscriptState::Read, "{r:?}");
    assert_eq!(r.bytes.as_deref(), Some(OPENCODE_REAL));
    let argv = std::fs::read_to_string(&log).unwrap();
    assert_eq!(
        argv, "export --pure ses_abc\n6\n",
        "once, with --pure and the offline switches"
    );

    // What it says for a session it does not have (an empty storage): absent, not empty.
    let none = program(
        t.path(),
        "echo 'Exporting session: x' >&2; printf '\\033[91m\\033[1mError: \\033[0mSession not found: x\\n' >&2; exit 1",
    );
    assert_eq!(
        export_state(&exporter(none.clone(), t.path(), 10), false).state,
        TranscriptState::Missing
    );
    assert_eq!(
        export_state(&exporter(none, t.path(), 10), true).state,
        TranscriptState::Pending
    );

    // Any other failure is unreadable, with the reason.
    let fail = program(t.path(), "echo 'database is locked' >&2; exit 3");
    let r = export_state(&exporter(fail, t.path(), 10), false);
    assert_eq!(r.state, TranscriptState::Unreadable);
    let why = r.reason.unwrap();
    assert!(
        why.contains("exited with status 3") && why.contains("database is locked"),
        "{why}"
    );

    let junk = program(t.path(), "echo not json");
    let r = export_state(&exporter(junk, t.path(), 10), false);
    assert!(r.reason.unwrap().contains("not one JSON object"));

    // Past the deadline: killed, with what it left in its group.
    let slow = program(t.path(), "sleep 30 & sleep 30");
    let started = std::time::Instant::now();
    let r = export_state(&exporter(slow, t.path(), 1), false);
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    assert!(r.reason.unwrap().contains("did not finish within 1 s"));

    // More than 8 MiB: refused at once, not read to the end.
    let huge = program(t.path(), "head -c 20000000 /dev/zero");
    let r = export_state(&exporter(huge, t.path(), 20), false);
    assert_eq!(r.state, TranscriptState::Unreadable);
    assert!(r.reason.unwrap().contains("more than the 8388608 bytes"));

    // No way to run it, or an id that is an option: unreadable, nothing run.
    let t2 = tempfile::tempdir().unwrap();
    let r = raw(
        &target(Tool::Opencode, t2.path(), Path::new("/w"), "ses_abc", false),
        &mut Budget::default(),
    )
    .unwrap();
    assert_eq!(r.state, TranscriptState::Unreadable);
    assert!(
        !opencode::valid_id("--help")
            && !opencode::valid_id("a/b")
            && opencode::valid_id("ses_dc35b18d1ffe0PsN7Wj3xgHqyk")
    );
}

/// Hand-written frames in the shape claude 2.1.332's bundle declares for its `system`
/// `task_started` / `task_progress` messages and their `workflow_progress` rows.
const CLAUDE_TASK_PROGRESS: &[u8] =
    include_bytes!("../../../tests/data/records/claude-task-progress-2.1.332-shape.jsonl");

#[test]
fn claude_workflow_snapshots_are_the_latest_task_progress_of_each_run_and_no_phase_completes_live()
{
    use activity::{WorkState, claude_workflows};
    let w = claude_workflows(CLAUDE_TASK_PROGRESS);
    assert_eq!(w.len(), 2, "{w:#?}");
    let r = &w[0];
    assert_eq!(r.run_id, "wf-1");
    assert_eq!(r.task_id, "t1");
    assert_eq!(r.tool_use_id.as_deref(), Some("toolu_w1"));
    assert_eq!(r.name.as_deref(), Some("review"), "from its task_started");
    assert_eq!(r.duration_ms, Some(5400), "the latest snapshot");
    assert_eq!((r.agents_total, r.agents_done, r.agents_failed), (4, 2, 1));
    let states: Vec<(i64, &str, WorkState, u64, u64, u64)> = r
        .phases
        .iter()
        .map(|p| {
            (
                p.index,
                p.title.as_str(),
                p.state,
                p.agents_total,
                p.agents_done,
                p.agents_failed,
            )
        })
        .collect();
    assert_eq!(
        states,
        vec![
            // Its one agent is done: that does not complete the phase.
            (0, "Read", WorkState::Scheduled, 1, 1, 0),
            (1, "Judge", WorkState::Failed, 3, 1, 1),
            (2, "Report", WorkState::Scheduled, 0, 0, 0),
        ]
    );
    // A progress frame without a start frame: its task id stands for the run, no name.
    assert_eq!(w[1].run_id, "t9");
    assert_eq!(w[1].name, None);
    // A frame without workflow_progress (a sub-agent's) is no workflow.
    assert!(w.iter().all(|x| x.task_id != "t2"));
    // Bounded: only the newest MAX_WORKFLOWS runs are kept.
    let mut many = Vec::new();
    for i in 0..(activity::MAX_WORKFLOWS + 5) {
        many.extend_from_slice(
            format!(
                "{{\"type\":\"system\",\"subtype\":\"task_progress\",\"task_id\":\"t{i}\",\
                 \"workflow_progress\":[]}}\n"
            )
            .as_bytes(),
        );
    }
    let w = claude_workflows(&many);
    assert_eq!(w.len(), activity::MAX_WORKFLOWS);
    assert_eq!(w[0].run_id, "t5");
    // A torn or hostile line is skipped, never fatal.
    assert!(
        claude_workflows(b"{\"type\":\"system\",\"subtype\":\"task_progress\"\n\xff\n").is_empty()
    );
}

/// The real claude 2.1.332's stdout with no login, an account home naming one user MCP
/// server that does not answer, a home skill and a project skill.
const CLAUDE_ANNOUNCED_REAL: &[u8] =
    include_bytes!("../../../tests/data/real/probe/claude-2.1.332-init-announced.stdout.jsonl");

#[test]
fn claudes_init_frame_announces_its_mcp_servers_and_skills_merged_with_what_it_used() {
    let n = activity::claude_announced(CLAUDE_ANNOUNCED_REAL).expect("the real init frame");
    assert_eq!(n.mcp_servers.len(), 1);
    let m = &n.mcp_servers[0];
    assert_eq!(
        (
            m.name.as_str(),
            m.status.as_deref(),
            m.source.as_deref(),
            m.calls
        ),
        ("probe", Some("failed"), Some("user"), 0)
    );
    assert_eq!(&n.skills[..2], ["homeskill", "wsskill"]);
    assert!(
        n.skills.contains(&"simplify".to_string()),
        "its built-in ones too"
    );
    // Merged into what the record shows used: calls kept, announcement added, sorted.
    let mut a = activity::Activity {
        skills: vec!["mine".into(), "wsskill".into()],
        skills_used: vec!["mine".into(), "wsskill".into()],
        mcp_servers: vec![
            activity::McpServer {
                name: "zz".into(),
                calls: 2,
                status: None,
                source: None,
            },
            activity::McpServer {
                name: "probe".into(),
                calls: 3,
                status: None,
                source: None,
            },
        ],
        ..activity::Activity::default()
    };
    a.announce(&n);
    assert_eq!(a.skills[..2], ["homeskill", "wsskill"]);
    assert_eq!(
        a.skills.last().unwrap(),
        "mine",
        "a used skill it did not announce"
    );
    assert_eq!(a.skills.iter().filter(|s| *s == "wsskill").count(), 1);
    assert_eq!(a.skills_used, ["mine", "wsskill"]);
    let names: Vec<(&str, u64, Option<&str>)> = a
        .mcp_servers
        .iter()
        .map(|m| (m.name.as_str(), m.calls, m.status.as_deref()))
        .collect();
    assert_eq!(names, [("probe", 3, Some("failed")), ("zz", 2, None)]);
    // The last init frame wins; none, nothing announced; hostile shapes are skipped.
    let two = b"{\"type\":\"system\",\"subtype\":\"init\",\"skills\":[\"a\"],\"mcp_servers\":[]}\n\
        {\"type\":\"system\",\"subtype\":\"init\",\"skills\":[\"b\",7,\"\"],\"mcp_servers\":[{\"status\":\"x\"},{\"name\":\"s\"},{\"name\":\"s\"}]}\n";
    let n = activity::claude_announced(two).unwrap();
    assert_eq!(n.skills, ["b"]);
    assert_eq!(n.mcp_servers.len(), 1);
    assert_eq!(n.mcp_servers[0].status, None);
    assert!(
        activity::claude_announced(CLAUDE_TASK_PROGRESS.split(|b| *b == b'\n').nth(1).unwrap())
            .is_none()
    );
}

#[test]
fn a_workflow_summary_gives_final_states_and_replaces_its_live_snapshot() {
    use activity::{SummaryRead, WorkState, claude_workflow_summary, merge_summaries};
    let s = br#"{"runId":"wf-1","taskId":"t1","workflowName":"review","status":"completed","durationMs":9100,"agentCount":5,
        "workflowProgress":[{"type":"workflow_phase","index":0,"title":"Read"},{"type":"workflow_phase","index":1,"title":"Judge"},
        {"type":"workflow_agent","index":0,"state":"done","phaseIndex":0},{"type":"workflow_agent","index":1,"state":"error","phaseIndex":1},
        {"type":"workflow_log","text":"x"}]}"#;
    let w = claude_workflow_summary(s).unwrap();
    assert_eq!(w.state, Some(WorkState::Completed));
    assert_eq!(w.summary, SummaryRead::Read);
    assert_eq!(w.agents_total, 5, "its own count when larger than the rows");
    let states: Vec<WorkState> = w.phases.iter().map(|p| p.state).collect();
    assert_eq!(states, [WorkState::Completed, WorkState::Failed]);
    // Seeded phases when no phase rows: killed, none of them finished.
    let k = claude_workflow_summary(
        br#"{"runId":"wf-3","status":"killed","phases":[{"title":"One"},{"title":"Two"}]}"#,
    )
    .unwrap();
    assert_eq!(k.state, Some(WorkState::Stopped));
    let states: Vec<(&str, WorkState)> = k
        .phases
        .iter()
        .map(|p| (p.title.as_str(), p.state))
        .collect();
    assert_eq!(
        states,
        [("One", WorkState::Stopped), ("Two", WorkState::Stopped)]
    );
    for bad in [
        &b"{"[..],
        b"[]",
        br#"{"status":"completed"}"#,
        br#"{"runId":"x","status":"running"}"#,
    ] {
        assert!(
            claude_workflow_summary(bad).is_err(),
            "{}",
            String::from_utf8_lossy(bad)
        );
    }
    // Merged: the summary replaces the snapshot, keeping its tool use; an unreadable one
    // marks its snapshot or stands alone.
    let live = activity::claude_workflows(CLAUDE_TASK_PROGRESS);
    let out = merge_summaries(
        live,
        vec![
            ("wf-1".into(), Ok(w)),
            ("t9".into(), Err("refused".into())),
            ("wf-7".into(), Err("too big".into())),
        ],
    );
    assert_eq!(out.len(), 3);
    assert_eq!(out[0].summary, SummaryRead::Read);
    assert_eq!(out[0].tool_use_id.as_deref(), Some("toolu_w1"));
    assert_eq!(out[1].summary, SummaryRead::Unreadable);
    assert_eq!(out[1].phases.len(), 1, "its live progress kept");
    assert_eq!(out[2].run_id, "wf-7");
    assert_eq!(out[2].summary_reason.as_deref(), Some("too big"));
}
