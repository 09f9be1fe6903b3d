//! The decoder against frames recorded from the real tools (`tests/data/real/conversation/`,
//! see its README) and, where the real tools cannot be made to send a frame without a model
//! (tool calls, reasoning, plans), frames in the shapes their own definitions give: claude's
//! from anthropics/claude-agent-sdk-python (`types.py`: `ToolUseBlock`, `ToolResultBlock`,
//! `ThinkingBlock`), codex's from the JSON schema codex 0.171 generates
//! (`codex app-server generate-json-schema`: `ThreadItem`, `TurnPlanUpdatedNotification`,
//! `ThreadTokenUsageUpdatedNotification`), ACP's from zed-industries/agent-client-protocol
//! (`SessionUpdate`).

use super::*;

const CLAUDE_NO_LOGIN: &str =
    include_str!("../../../tests/data/real/conversation/claude-2.1.332-turn-no-login.stdout.jsonl");
const CODEX_OFFLINE: &str =
    include_str!("../../../tests/data/real/conversation/codex-0.171.0-turn-offline.stdout.jsonl");
const GEMINI_START: &str =
    include_str!("../../../tests/data/real/conversation/gemini-0.61.0-start.stdout.jsonl");
const OPENCODE_START: &str =
    include_str!("../../../tests/data/real/conversation/opencode-1.18.33-start.stdout.jsonl");

fn read_all(r: &mut Reader, dir: Direction, lines: &str) -> Vec<Said> {
    lines
        .lines()
        .flat_map(|l| r.read(dir, l.as_bytes()))
        .collect()
}

fn err(message: &str) -> Said {
    Said::Error {
        message: message.into(),
        detail: None,
        will_retry: None,
        attempt: None,
        max_attempts: None,
    }
}

#[test]
fn claude_without_a_login_says_who_spoke_and_why_it_failed() {
    let mut r = Reader::new(Some(StdioProtocol::ClaudeStreamJson));
    let mut said = r.read(
        Direction::Stdin,
        br#"{"type":"user","message":{"role":"user","content":"say hi"},"parent_tool_use_id":null,"session_id":"default"}"#,
    );
    said.extend(read_all(&mut r, Direction::Stdout, CLAUDE_NO_LOGIN));
    assert_eq!(
        said,
        [
            Said::PersonTurn {
                text: "say hi".into()
            },
            Said::Session {
                id: "57c2b5f8-53aa-4ea7-b56c-fb7452ea6a22".into(),
                model: Some("claude-opus-5-5".into()),
            },
            Said::Error {
                message: "Not logged in · Please run /login".into(),
                detail: Some("authentication_failed".into()),
                will_retry: None,
                attempt: None,
                max_attempts: None,
            },
            Said::Usage {
                input_tokens: Some(0),
                output_tokens: Some(0),
                cost_usd: Some(0.0),
                context_used: None,
                context_window: None,
            },
            Said::TurnEnded {
                outcome: TurnOutcome::Failed,
                detail: Some("api_error".into()),
            },
        ]
    );
}

#[test]
fn codex_offline_turn_shows_the_person_once_and_every_retry() {
    let mut r = Reader::new(Some(StdioProtocol::CodexAppServer));
    let stdin = [
        r#"{"id":0,"method":"initialize","params":{"clientInfo":{"name":"proctor","title":"proctor","version":"0.1.0"}}}"#,
        r#"{"method":"initialized"}"#,
        r#"{"id":1,"method":"thread/start","params":{"cwd":"/tmp/rt2/ws"}}"#,
    ];
    let lines: Vec<&str> = CODEX_OFFLINE.lines().collect();
    let mut said = Vec::new();
    for l in stdin {
        said.extend(r.read(Direction::Stdin, l.as_bytes()));
    }
    // The answers to initialize and thread/start, the notifications before the turn.
    for l in &lines[..5] {
        said.extend(r.read(Direction::Stdout, l.as_bytes()));
    }
    said.extend(r.read(
        Direction::Stdin,
        br#"{"id":2,"method":"turn/start","params":{"threadId":"01a232bf-79c8-7ae0-89df-e4e03a1ef4a7","input":[{"type":"text","text":"say hi"}]}}"#,
    ));
    for l in &lines[5..] {
        said.extend(r.read(Direction::Stdout, l.as_bytes()));
    }
    let warning = Said::Warning {
        message: "Codex could not find bubblewrap on PATH. Install bubblewrap with your OS package manager. See the sandbox prerequisites: https://developers.openai.com/codex/concepts/sandboxing#prerequisites. Codex will use the bundled bubblewrap in the meantime.".into(),
    };
    let lookup = "stream disconnected before completion: failed to lookup address information: Name does not resolve";
    let retry = |n: u32| Said::Error {
        message: format!("Reconnecting... {n}/5"),
        detail: Some(lookup.into()),
        will_retry: Some(true),
        attempt: None,
        max_attempts: None,
    };
    let waiting = Said::Error {
        message: "Reconnecting... waiting for network".into(),
        detail: Some("Connection failed: error sending request".into()),
        will_retry: Some(true),
        attempt: None,
        max_attempts: None,
    };
    assert_eq!(
        said,
        [
            warning,
            Said::Session {
                id: "01a232bf-79c8-7ae0-89df-e4e03a1ef4a7".into(),
                model: Some("gpt-6.2-sol".into()),
            },
            Said::PersonTurn {
                text: "say hi".into()
            },
            Said::TurnStarted,
            retry(2),
            retry(3),
            retry(4),
            retry(5),
            Said::Warning {
                message: format!("Falling back from WebSockets to HTTPS transport. {lookup}"),
            },
            waiting.clone(),
            waiting,
        ]
    );
}

#[test]
fn acp_refusals_and_sessions_from_the_real_agents() {
    let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}"#;
    let new =
        r#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/w","mcpServers":[]}}"#;
    let mut r = Reader::new(Some(StdioProtocol::Acp));
    r.read(Direction::Stdin, init.as_bytes());
    r.read(Direction::Stdin, new.as_bytes());
    let said = read_all(&mut r, Direction::Stdout, GEMINI_START);
    assert_eq!(
        said,
        [Said::Error {
            message: "Gemini API key is missing or not configured.".into(),
            detail: Some("session/new".into()),
            will_retry: None,
            attempt: None,
            max_attempts: None,
        }]
    );
    let mut r = Reader::new(Some(StdioProtocol::Acp));
    r.read(Direction::Stdin, init.as_bytes());
    r.read(Direction::Stdin, new.as_bytes());
    let said = read_all(&mut r, Direction::Stdout, OPENCODE_START);
    assert_eq!(
        said,
        [Said::Session {
            id: "ses_dcda3babeffeuHdEDX42kxRq1N".into(),
            model: Some("opencode/big-pickle".into()),
        }]
    );
}

#[test]
fn claude_tool_calls_thinking_todos_and_retries() {
    let mut r = Reader::new(Some(StdioProtocol::ClaudeStreamJson));
    let lines = [
        r#"{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":500,"error_status":529,"error":"overloaded_error","session_id":"s"}"#,
        r#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"thinking","thinking":"look at the tests","signature":"x"},{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"cargo test","description":"Run the tests"}}]},"session_id":"s"}"#,
        r#"{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_1","type":"tool_result","content":"Exit code 101\nerror: 1 test failed","is_error":true}]},"session_id":"s"}"#,
        r#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"tool_use","id":"toolu_2","name":"TodoWrite","input":{"todos":[{"content":"fix","status":"in_progress","activeForm":"fixing"},{"content":"test","status":"pending","activeForm":"testing"}]}}]},"session_id":"s"}"#,
        r#"{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_2","type":"tool_result","content":"ok"}]},"session_id":"s"}"#,
        r#"{"type":"assistant","message":{"role":"assistant","content":[{"type":"tool_use","id":"toolu_3","name":"Edit","input":{"file_path":"/w/src/a.rs","old_string":"a","new_string":"b"}}]},"session_id":"s"}"#,
        r#"{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_3","type":"tool_result","content":[{"type":"text","text":"edited"}]}]},"session_id":"s"}"#,
        r#"{"type":"control_request","request_id":"r1","request":{"subtype":"can_use_tool","tool_name":"Bash","input":{"command":"rm -rf target"}}}"#,
        "not a frame",
    ];
    let said: Vec<Said> = lines
        .iter()
        .flat_map(|l| r.read(Direction::Stdout, l.as_bytes()))
        .collect();
    let bash = |status, exit_code, output: Option<&str>| Said::ToolCall {
        id: "toolu_1".into(),
        kind: "Bash".into(),
        title: Some("Run the tests".into()),
        command: Some("cargo test".into()),
        path: None,
        status,
        exit_code,
        output: output.map(str::to_string),
    };
    let edit = |status, output: Option<&str>| Said::ToolCall {
        id: "toolu_3".into(),
        kind: "Edit".into(),
        title: None,
        command: None,
        path: Some("/w/src/a.rs".into()),
        status,
        exit_code: None,
        output: output.map(str::to_string),
    };
    assert_eq!(
        said,
        [
            Said::Error {
                message: "overloaded_error".into(),
                detail: None,
                will_retry: Some(true),
                attempt: Some(1),
                max_attempts: Some(10),
            },
            Said::Reasoning {
                text: "look at the tests".into()
            },
            bash(ToolStatus::Started, None, None),
            bash(
                ToolStatus::Failed,
                Some(101),
                Some("Exit code 101\nerror: 1 test failed")
            ),
            Said::Plan {
                entries: vec![
                    PlanEntry {
                        text: "fix".into(),
                        status: Some("in_progress".into())
                    },
                    PlanEntry {
                        text: "test".into(),
                        status: Some("pending".into())
                    },
                ]
            },
            edit(ToolStatus::Started, None),
            edit(ToolStatus::Ended, Some("edited")),
            Said::Permission {
                method: "can_use_tool".into(),
                what: Some("Bash: rm -rf target".into()),
            },
            Said::Raw {
                stderr: false,
                text: "not a frame".into()
            },
        ]
    );
    assert_eq!(
        r.read(Direction::Stderr, b"warn\n"),
        [Said::Raw {
            stderr: true,
            text: "warn".into()
        }]
    );
}

#[test]
fn codex_items_deltas_plans_and_usage() {
    let mut r = Reader::new(Some(StdioProtocol::CodexAppServer));
    let lines = [
        r#"{"method":"item/started","params":{"item":{"type":"reasoning","id":"r1","summary":[],"content":[]},"threadId":"t","turnId":"u"}}"#,
        r#"{"method":"item/reasoning/summaryTextDelta","params":{"delta":"thinking","itemId":"r1","summaryIndex":0,"threadId":"t","turnId":"u"}}"#,
        r#"{"method":"item/completed","params":{"item":{"type":"reasoning","id":"r1","summary":["thinking"],"content":[]},"threadId":"t","turnId":"u"}}"#,
        r#"{"method":"item/started","params":{"item":{"type":"commandExecution","id":"c1","command":"cargo test","commandActions":[],"cwd":"/w","status":"inProgress","aggregatedOutput":null,"exitCode":null},"threadId":"t","turnId":"u"}}"#,
        r#"{"method":"item/commandExecution/outputDelta","params":{"delta":"running 3 tests\n","itemId":"c1","threadId":"t","turnId":"u"}}"#,
        r#"{"method":"item/completed","params":{"item":{"type":"commandExecution","id":"c1","command":"cargo test","commandActions":[],"cwd":"/w","status":"failed","aggregatedOutput":"running 3 tests\nFAILED\n","exitCode":1,"durationMs":20},"threadId":"t","turnId":"u"}}"#,
        r#"{"method":"item/started","params":{"item":{"type":"fileChange","id":"f1","changes":[{"path":"src/a.rs","kind":{"type":"update","move_path":null},"diff":"@@"}],"status":"inProgress"},"threadId":"t","turnId":"u"}}"#,
        r#"{"method":"item/completed","params":{"item":{"type":"fileChange","id":"f1","changes":[{"path":"src/a.rs","kind":{"type":"update","move_path":null},"diff":"@@"}],"status":"completed"},"threadId":"t","turnId":"u"}}"#,
        r#"{"method":"turn/plan/updated","params":{"threadId":"t","turnId":"u","explanation":null,"plan":[{"step":"read","status":"completed"},{"step":"fix","status":"inProgress"}]}}"#,
        r#"{"method":"item/completed","params":{"item":{"type":"agentMessage","id":"a1","text":"done"},"threadId":"t","turnId":"u"}}"#,
        r#"{"method":"thread/tokenUsage/updated","params":{"threadId":"t","turnId":"u","tokenUsage":{"total":{"cachedInputTokens":0,"inputTokens":120,"outputTokens":30,"reasoningOutputTokens":0,"totalTokens":150},"last":{"cachedInputTokens":0,"inputTokens":120,"outputTokens":30,"reasoningOutputTokens":0,"totalTokens":150},"modelContextWindow":272000}}}"#,
        r#"{"id":7,"method":"item/commandExecution/requestApproval","params":{"threadId":"t","turnId":"u","itemId":"c2","command":"rm -rf target","reason":"clean"}}"#,
        r#"{"method":"turn/completed","params":{"threadId":"t","turn":{"id":"u","items":[],"status":"failed","error":{"message":"stream disconnected"}}}}"#,
    ];
    let said: Vec<Said> = lines
        .iter()
        .flat_map(|l| r.read(Direction::Stdout, l.as_bytes()))
        .collect();
    let cmd = |status, exit_code, output: Option<&str>| Said::ToolCall {
        id: "c1".into(),
        kind: "commandExecution".into(),
        title: None,
        command: Some("cargo test".into()),
        path: None,
        status,
        exit_code,
        output: output.map(str::to_string),
    };
    let file = |status| Said::ToolCall {
        id: "f1".into(),
        kind: "fileChange".into(),
        title: None,
        command: None,
        path: Some("src/a.rs".into()),
        status,
        exit_code: None,
        output: None,
    };
    assert_eq!(
        said,
        [
            Said::Reasoning {
                text: "thinking".into()
            },
            cmd(ToolStatus::Started, None, None),
            cmd(
                ToolStatus::Failed,
                Some(1),
                Some("running 3 tests\nFAILED\n")
            ),
            file(ToolStatus::Started),
            file(ToolStatus::Ended),
            Said::FileChange {
                path: "src/a.rs".into(),
                change: "update".into()
            },
            Said::Plan {
                entries: vec![
                    PlanEntry {
                        text: "read".into(),
                        status: Some("completed".into())
                    },
                    PlanEntry {
                        text: "fix".into(),
                        status: Some("inProgress".into())
                    },
                ]
            },
            Said::AgentText {
                text: "done".into()
            },
            Said::Usage {
                input_tokens: Some(120),
                output_tokens: Some(30),
                cost_usd: None,
                context_used: None,
                context_window: Some(272000),
            },
            Said::Permission {
                method: "item/commandExecution/requestApproval".into(),
                what: Some("rm -rf target".into()),
            },
            Said::TurnEnded {
                outcome: TurnOutcome::Failed,
                detail: Some("stream disconnected".into()),
            },
        ]
    );
}

#[test]
fn acp_prompt_updates_tools_and_stop_reason() {
    let mut r = Reader::new(Some(StdioProtocol::Acp));
    let mut said = r.read(
        Direction::Stdin,
        br#"{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"s","prompt":[{"type":"text","text":"fix it"}]}}"#,
    );
    let lines = [
        r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"user_message_chunk","content":{"type":"text","text":"fix it"}}}}"#,
        r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_thought_chunk","content":{"type":"text","text":"hmm"}}}}"#,
        r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call","toolCallId":"call_1","title":"Run cargo test","kind":"execute","status":"pending","rawInput":{"command":"cargo test"}}}}"#,
        r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call_update","toolCallId":"call_1","status":"in_progress","content":[{"type":"content","content":{"type":"text","text":"running"}}]}}}"#,
        r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"tool_call_update","toolCallId":"call_1","status":"failed"}}}"#,
        r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"plan","entries":[{"content":"a","priority":"high","status":"pending"}]}}}"#,
        r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"available_commands_update","availableCommands":[]}}}"#,
        r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"usage_update","used":5000,"size":200000,"cost":{"amount":0.25,"currency":"USD"}}}}"#,
        r#"{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"ok"}}}}"#,
        r#"{"jsonrpc":"2.0","id":9,"method":"session/request_permission","params":{"sessionId":"s","toolCall":{"toolCallId":"call_2","title":"Write a.rs"},"options":[]}}"#,
        r#"{"jsonrpc":"2.0","id":2,"result":{"stopReason":"end_turn"}}"#,
    ];
    for l in lines {
        said.extend(r.read(Direction::Stdout, l.as_bytes()));
    }
    let call = |status, output: Option<&str>| Said::ToolCall {
        id: "call_1".into(),
        kind: "execute".into(),
        title: Some("Run cargo test".into()),
        command: Some("cargo test".into()),
        path: None,
        status,
        exit_code: None,
        output: output.map(str::to_string),
    };
    assert_eq!(
        said,
        [
            Said::PersonTurn {
                text: "fix it".into()
            },
            Said::Reasoning { text: "hmm".into() },
            call(ToolStatus::Started, None),
            call(ToolStatus::Failed, Some("running")),
            Said::Plan {
                entries: vec![PlanEntry {
                    text: "a".into(),
                    status: Some("pending".into())
                }]
            },
            Said::Usage {
                input_tokens: None,
                output_tokens: None,
                cost_usd: Some(0.25),
                context_used: Some(5000),
                context_window: Some(200000),
            },
            Said::AgentText { text: "ok".into() },
            Said::Permission {
                method: "session/request_permission".into(),
                what: Some("Write a.rs".into()),
            },
            Said::TurnEnded {
                outcome: TurnOutcome::Completed,
                detail: Some("end_turn".into()),
            },
        ]
    );
}

#[test]
fn strings_are_bounded_and_unknown_tools_are_raw() {
    let mut r = Reader::for_tool("nope");
    assert!(!r.decodes());
    assert_eq!(
        r.read(Direction::Stdout, br#"{"type":"assistant"}"#),
        [Said::Raw {
            stderr: false,
            text: r#"{"type":"assistant"}"#.into()
        }]
    );
    let mut r = Reader::for_tool("claude");
    let long = "x".repeat(MAX_FIELD + 10);
    let line = format!(
        r#"{{"type":"assistant","error":"e","message":{{"content":[{{"type":"text","text":"{long}"}}]}}}}"#
    );
    let said = r.read(Direction::Stdout, line.as_bytes());
    let Said::Error { message, .. } = &said[0] else {
        panic!("{said:?}")
    };
    assert_eq!(message.chars().count(), MAX_FIELD + 1);
    assert!(message.ends_with('…'));
    assert_eq!(said.len(), 1, "{:?}", err("x"));
}

#[test]
fn lines_join_streamed_text_and_describe_each_event() {
    let mut l = Lines::new();
    let mut out = Vec::new();
    for s in [
        Said::PersonTurn {
            text: "fix it\nplease".into(),
        },
        Said::AgentText { text: "wor".into() },
        Said::AgentText {
            text: "king\nand ".into(),
        },
        Said::ToolCall {
            id: "1".into(),
            kind: "Bash".into(),
            title: Some("Run tests".into()),
            command: Some("cargo test".into()),
            path: None,
            status: ToolStatus::Failed,
            exit_code: Some(101),
            output: None,
        },
        Said::Usage {
            input_tokens: Some(3),
            output_tokens: None,
            cost_usd: None,
            context_used: None,
            context_window: Some(200000),
        },
        Said::TurnEnded {
            outcome: TurnOutcome::Completed,
            detail: Some("end_turn".into()),
        },
    ] {
        out.extend(l.push(&s));
    }
    out.extend(l.finish());
    let text: Vec<(Voice, &str)> = out.iter().map(|l| (l.voice, l.text.as_str())).collect();
    assert_eq!(
        text,
        [
            (Voice::Person, "you: fix it"),
            (Voice::Person, "     please"),
            (Voice::Agent, "working"),
            (Voice::Agent, "and "),
            (Voice::Tool, "▸ Bash: cargo test — Run tests (exit 101)"),
            (Voice::Note, "usage: in 3 · context window 200000"),
            (Voice::Note, "── turn ended: completed (end_turn)"),
        ]
    );
    assert_eq!(out[4].call.as_deref(), Some("1"));
    // Nothing reported: no usage line at all.
    assert!(
        describe(&Said::Usage {
            input_tokens: None,
            output_tokens: None,
            cost_usd: None,
            context_used: None,
            context_window: None,
        })
        .is_empty()
    );
}

proptest::proptest! {
    /// Whatever a tool (or a corrupted stream) writes, the reader answers, never panics, and
    /// keeps every string bounded.
    #[test]
    fn any_line_in_any_direction_is_read(line in proptest::collection::vec(proptest::num::u8::ANY, 0..400),
                                          frame in "\\{\"(type|method|id|jsonrpc|params|item|update)\":[ -~]{0,80}\\}") {
        for p in [StdioProtocol::ClaudeStreamJson, StdioProtocol::CodexAppServer, StdioProtocol::Acp] {
            let mut r = Reader::new(Some(p));
            for dir in [Direction::Stdout, Direction::Stderr, Direction::Stdin] {
                for said in r.read(dir, &line).into_iter().chain(r.read(dir, frame.as_bytes())) {
                    let json = serde_json::to_string(&said).unwrap();
                    proptest::prop_assert!(json.len() < 8 * MAX_TEXT, "{}", json);
                }
            }
        }
    }
}
