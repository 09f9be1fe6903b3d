//! The Activity view's state: what the focused session's tool recorded in its own native
//! record (`GET /runs/{ref}/activity`: the context, the model, compactions, the transcript's
//! state, tasks, files, todos, agents), and the search of its messages
//! (`GET /runs/{ref}/messages?q=…`). The activity is read when the view opens, when the
//! focus moves to another run, on a refresh, and when the focused run's ledger moves (a new
//! newest event in what the data task fetches for the events pane): never on a frame. The
//! search pages with the server's cursor as the selection reaches the last match.
//!
//! This part holds the answers as the contract's types and the rows they make
//! ([`activity_rows`]); the drawing (`ui::activity`) sends every string through the
//! sanitiser.

use hyper::Method;
use ratatui::layout::Rect;

use crate::api::runs::TranscriptState;
use crate::api::runs::{self as wire, MessageItem, MessagePage, MessagesQuery, RunActivity};
use crate::tui::action::Action;
use crate::tui::role::Role;
use crate::tui::views::Tab;

use super::{App, Call, CallTag, Effect, Modal};

/// The most bytes of a search's query (the server's own bound on `q`).
pub const MAX_QUERY: usize = 256;
/// Matches asked for per page (a page with `text=1` holds at most 50).
pub const PAGE: usize = 50;
/// The rows above the matches in the pane: the context line, the model line, the search's
/// header.
pub const SEARCH_HEAD: usize = 3;

/// A search of the focused run's messages.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Search {
    pub run: String,
    pub query: String,
    /// The matches heard so far, oldest first (pages appended in order).
    pub items: Vec<MessageItem>,
    /// How many messages match, when the server says.
    pub total: Option<u64>,
    /// The cursor of the next page, when there are more.
    pub next: Option<String>,
    pub transcript: Option<TranscriptState>,
    pub reason: Option<String>,
    /// The server's refusal of the last page asked for.
    pub error: Option<String>,
    /// A page is on its way.
    pub loading: bool,
    pub selected: usize,
    /// The first match row in view.
    pub offset: usize,
}

/// The activity pane's state.
#[derive(Debug, Default)]
pub struct ActivityPane {
    /// The run whose activity is held (or asked for).
    pub run: Option<String>,
    /// Its last answer (`Err`: what the server said, e.g. the 422 of a tool without one).
    pub activity: Option<Result<RunActivity, String>>,
    /// A read is on its way.
    pub loading: bool,
    /// The focused run's newest event seq when the activity was last asked for.
    pub asked_at: Option<u64>,
    /// How far the activity's rows are scrolled, and how many the pane shows.
    pub scroll: usize,
    pub rows: usize,
    /// The search, while one is shown (esc goes back to the activity).
    pub search: Option<Search>,
}

/// One row of the activity as the pane shows it (unsanitised; the drawing sanitises).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Row {
    pub role: Role,
    pub text: String,
}

fn row(role: Role, text: impl Into<String>) -> Row {
    Row {
        role,
        text: text.into(),
    }
}

/// `n` with thin groups of three digits: 200000 → 200,000.
pub fn grouped(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The transcript's state in words (as the server says it: never a guess).
pub fn transcript_word(t: TranscriptState) -> &'static str {
    match t {
        TranscriptState::Read => "read",
        TranscriptState::Pending => "pending (the tool has not written it yet)",
        TranscriptState::Missing => "missing (it should be there and is not)",
        TranscriptState::Unreadable => "unreadable",
    }
}

fn transcript_role(t: TranscriptState) -> Role {
    match t {
        TranscriptState::Read => Role::Success,
        TranscriptState::Pending => Role::Dim,
        TranscriptState::Missing | TranscriptState::Unreadable => Role::Warning,
    }
}

/// The context line: the tokens of the last request, against the window when it is known
/// (with its percentage); a window that is unknown is said so, never guessed.
pub fn context_line(a: &RunActivity) -> (Role, String, Option<f64>) {
    match (a.context_tokens, a.context_window) {
        (None, _) => (
            Role::Dim,
            "context unknown (no request recorded yet)".into(),
            None,
        ),
        (Some(t), Some(w)) if w > 0 => {
            let pct = a
                .context_percent
                .unwrap_or_else(|| ((t as f64) * 1000.0 / (w as f64)).round() / 10.0);
            let role = if pct >= 90.0 {
                Role::Error
            } else if pct >= 75.0 {
                Role::Warning
            } else {
                Role::Text
            };
            (
                role,
                format!(
                    "context {}% · {} / {} tokens",
                    trim_pct(pct),
                    grouped(t),
                    grouped(w)
                ),
                Some(pct),
            )
        }
        (Some(t), _) => (
            Role::Text,
            format!("context {} tokens · window unknown", grouped(t)),
            None,
        ),
    }
}

fn trim_pct(p: f64) -> String {
    let s = format!("{p:.1}");
    s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
}

/// The model line: the model, compactions, the transcript's state (and its reason).
pub fn model_line(a: &RunActivity) -> (Role, String) {
    let model = a.model.as_deref().unwrap_or("unknown");
    let mut s = format!(
        "model {model} · compactions {} · transcript {}",
        a.compactions,
        transcript_word(a.transcript)
    );
    if let Some(r) = &a.reason {
        s.push_str(&format!(": {r}"));
    }
    (transcript_role(a.transcript), s)
}

fn work(s: crate::api::runs::WorkState) -> (&'static str, Role) {
    use crate::api::runs::WorkState as W;
    match s {
        W::Running => ("running", Role::StateRunning),
        W::Completed => ("done", Role::Success),
        W::Failed => ("failed", Role::Error),
        W::Stopped => ("stopped", Role::Warning),
        W::Scheduled => ("scheduled", Role::Dim),
    }
}

/// The activity's sections under its two head lines: tasks (state, tool and what it ran),
/// files (+added −removed, a count the record does not give shown as `?`), todos, agents,
/// skills and MCP servers. Newest tasks last, as the record has them.
pub fn activity_rows(a: &RunActivity) -> Vec<Row> {
    let mut rows = Vec::new();
    let omitted = if a.tasks_omitted > 0 {
        format!(" (and {} older)", a.tasks_omitted)
    } else {
        String::new()
    };
    rows.push(row(
        Role::Title,
        format!("Tasks {}{omitted}", a.tasks.len()),
    ));
    if a.tasks.is_empty() {
        rows.push(row(Role::Dim, "  none recorded"));
    }
    for t in &a.tasks {
        let (word, role) = work(t.state);
        let mut s = format!("  {word:<9} {}", t.tool);
        if t.background {
            s.push_str(" (background)");
        }
        if let Some(c) = &t.command {
            s.push_str(&format!(" {c}"));
        }
        if let Some(x) = t.exit_code {
            s.push_str(&format!(" · exit {x}"));
        }
        rows.push(row(role, s));
    }
    rows.push(row(Role::Title, format!("Files {}", a.files.len())));
    if a.files.is_empty() {
        rows.push(row(Role::Dim, "  none changed"));
    }
    let count = |n: Option<u64>| n.map_or("?".to_string(), |n| n.to_string());
    for f in &a.files {
        rows.push(row(
            Role::Text,
            format!(
                "  +{:<4} −{:<4} {}{}",
                count(f.added),
                count(f.removed),
                f.path,
                if f.created { " (new)" } else { "" }
            ),
        ));
    }
    rows.push(row(Role::Title, format!("Todos {}", a.todos.len())));
    if a.todos.is_empty() {
        rows.push(row(Role::Dim, "  none"));
    }
    for t in &a.todos {
        let (mark, role) = match t.status.as_str() {
            "completed" => ("[x]", Role::Success),
            "in_progress" => ("[>]", Role::StateRunning),
            "pending" => ("[ ]", Role::Text),
            _ => ("[?]", Role::Dim),
        };
        rows.push(row(role, format!("  {mark} {}", t.content)));
    }
    rows.push(row(Role::Title, format!("Agents {}", a.agents.len())));
    if a.agents.is_empty() {
        rows.push(row(Role::Dim, "  none"));
    }
    for g in &a.agents {
        let (word, role) = work(g.state);
        let mut s = format!("  {word:<9}");
        if let Some(k) = &g.kind {
            s.push_str(&format!(" {k}"));
        }
        s.push_str(&format!(" {}", g.description.as_deref().unwrap_or(&g.id)));
        rows.push(row(role, s));
    }
    if !a.skills.is_empty() {
        rows.push(row(Role::Title, format!("Skills {}", a.skills.len())));
        rows.push(row(Role::Text, format!("  {}", a.skills.join(", "))));
    }
    if !a.mcp_servers.is_empty() {
        rows.push(row(
            Role::Title,
            format!("MCP servers {}", a.mcp_servers.len()),
        ));
        for m in &a.mcp_servers {
            rows.push(row(
                Role::Text,
                format!("  {} · {} call(s)", m.name, m.calls),
            ));
        }
    }
    rows
}

/// A match's row: its id, role, time (`HH:MM:SS` of its RFC 3339 instant, as recorded) and
/// first line.
pub fn match_row(m: &MessageItem) -> String {
    let role = match m.role {
        crate::api::runs::MessageRole::User => "user",
        crate::api::runs::MessageRole::Assistant => "assistant",
    };
    let at =
        m.at.as_deref()
            .and_then(|a| chrono::DateTime::parse_from_rfc3339(a).ok())
            .map(|t| {
                t.with_timezone(&chrono::Utc)
                    .format("%m-%d %H:%M")
                    .to_string()
            })
            .unwrap_or_else(|| "no time".into());
    format!("#{:<4} {role:<9} {at}  {}", m.id, m.first_line)
}

/// Refuses a query the server would refuse, before it is sent.
pub fn check_query(q: &str) -> Result<(), String> {
    if q.trim().is_empty() {
        Err("type a word or phrase to find (esc to cancel)".into())
    } else if q.len() > MAX_QUERY {
        Err(format!(
            "a search holds at most {MAX_QUERY} bytes (this one has {})",
            q.len()
        ))
    } else {
        Ok(())
    }
}

/// The page request of a search: every role, text included, from `cursor`.
pub fn search_path(run: &str, query: &str, cursor: Option<&str>) -> String {
    wire::messages(
        run,
        &MessagesQuery {
            role: Some("all".into()),
            q: Some(query.to_string()),
            limit: Some(PAGE.to_string()),
            cursor: cursor.map(str::to_string),
            text: Some("1".into()),
            ..MessagesQuery::default()
        },
    )
}

impl Search {
    /// Takes a page of the search: appended when it continues from a cursor.
    pub fn on_page(&mut self, cursor: Option<&str>, answer: Result<MessagePage, String>) {
        self.loading = false;
        match answer {
            Ok(p) => {
                if cursor.is_none() {
                    self.items.clear();
                    self.selected = 0;
                    self.offset = 0;
                }
                self.items.extend(p.items);
                self.total = p.total;
                self.next = p.next;
                self.transcript = Some(p.transcript);
                self.reason = p.reason;
                self.error = None;
            }
            Err(e) => self.error = Some(e),
        }
    }

    /// Moves the selection; `true` when it reached the last match and there are more to ask.
    fn navigate(&mut self, action: Action, page: usize) -> bool {
        let n = self.items.len();
        if n == 0 {
            return false;
        }
        let last = n - 1;
        let page = page.max(1);
        let wanted_past = matches!(
            action,
            Action::Down | Action::NextMatch | Action::PageDown | Action::Bottom
        ) && self.selected == last;
        self.selected = match action {
            Action::Up | Action::PrevMatch => self.selected.saturating_sub(1),
            Action::Down | Action::NextMatch => (self.selected + 1).min(last),
            Action::PageUp => self.selected.saturating_sub(page),
            Action::PageDown => (self.selected + page).min(last),
            Action::Top => 0,
            Action::Bottom => last,
            _ => self.selected,
        };
        (wanted_past || self.selected == last) && self.next.is_some() && !self.loading
    }

    /// Keeps the selection in view in `rows` rows.
    fn follow(&mut self, rows: usize) {
        let rows = rows.max(1);
        self.selected = self.selected.min(self.items.len().saturating_sub(1));
        if self.selected < self.offset {
            self.offset = self.selected;
        } else if self.selected >= self.offset + rows {
            self.offset = self.selected + 1 - rows;
        }
        self.offset = self.offset.min(self.items.len().saturating_sub(rows));
    }
}

impl ActivityPane {
    /// The rows the activity shows under its head (none before an answer).
    pub fn body_rows(&self) -> Vec<Row> {
        match &self.activity {
            Some(Ok(a)) => activity_rows(a),
            _ => Vec::new(),
        }
    }

    /// Its layout in the pane's `inner` area: the scroll stays within the rows, the search's
    /// selection in view.
    pub fn lay_out(&mut self, inner: Rect) {
        let h = usize::from(inner.height);
        match &mut self.search {
            Some(s) => {
                self.rows = h.saturating_sub(SEARCH_HEAD).max(1);
                s.follow(self.rows);
            }
            None => {
                self.rows = h.saturating_sub(2).max(1);
                let n = self.body_rows().len();
                self.scroll = self.scroll.min(n.saturating_sub(self.rows));
            }
        }
    }

    fn scroll_by(&mut self, action: Action) {
        let n = self.body_rows().len();
        let page = self.rows.max(1);
        let max = n.saturating_sub(page);
        self.scroll = match action {
            Action::Up => self.scroll.saturating_sub(1),
            Action::Down => self.scroll + 1,
            Action::PageUp => self.scroll.saturating_sub(page),
            Action::PageDown => self.scroll + page,
            Action::Top => 0,
            Action::Bottom => max,
            _ => self.scroll,
        }
        .min(max);
    }
}

impl App {
    /// The focused run's newest event seq, as the events pane holds it.
    fn focused_seq(&self) -> Option<u64> {
        let run = self.sessions.selected.as_deref()?;
        match &self.events.items {
            Some((r, items)) if r == run => items.iter().map(|e| e.seq).max(),
            _ => None,
        }
    }

    /// Asks for the focused run's activity (when the Activity view is shown). Another run
    /// than the one held: what was held (its search too) is forgotten first.
    pub(crate) fn ask_activity(&mut self) {
        if self.tab != Tab::Activity {
            return;
        }
        let Some(run) = self.sessions.selected.clone() else {
            self.activity = super::ActivityPane::default();
            return;
        };
        if self.activity.run.as_deref() != Some(run.as_str()) {
            self.activity = super::ActivityPane {
                run: Some(run.clone()),
                ..super::ActivityPane::default()
            };
        }
        self.activity.loading = true;
        self.activity.asked_at = self.focused_seq();
        self.push(Effect::Call(Call::to::<()>(
            CallTag::Activity { run: run.clone() },
            Method::GET,
            wire::at(wire::ACTIVITY, &run),
            None,
        )));
    }

    /// The focus or the focused run's events changed: the activity is read again when the
    /// view shows another run than the one held, or the run's ledger moved since.
    pub(crate) fn follow_activity(&mut self) {
        if self.tab != Tab::Activity {
            return;
        }
        let other = self.activity.run.as_deref() != self.sessions.selected.as_deref();
        let moved = !self.activity.loading
            && self.focused_seq().is_some()
            && self.focused_seq() != self.activity.asked_at;
        if other || moved {
            self.ask_activity();
        }
    }

    pub(super) fn on_activity(&mut self, run: String, result: Result<serde_json::Value, String>) {
        if self.activity.run.as_deref() != Some(run.as_str()) {
            return;
        }
        self.activity.loading = false;
        self.activity.activity = Some(result.and_then(|v| {
            serde_json::from_value::<RunActivity>(v)
                .map_err(|e| format!("the activity of {run} is not what the contract says: {e}"))
        }));
    }

    /// The search prompt for the focused run.
    pub(super) fn open_search(&mut self) {
        let Some(run) = self.selected_run().map(|r| r.run_ref.clone()) else {
            self.info("no session selected");
            return;
        };
        let last = self
            .activity
            .search
            .as_ref()
            .filter(|s| s.run == run)
            .map(|s| s.query.clone())
            .unwrap_or_default();
        let dialog = crate::tui::widgets::prompt::Prompt::new(
            format!("Search the messages of {run}"),
            "find (any case)",
        )
        .with_value(&last)
        .with_validator(Box::new(check_query))
        .with_hint("the tool's own transcript, your messages and its replies; at most 256 bytes");
        self.open_prompt(super::PromptFor::SearchMessages(run), dialog);
    }

    /// Starts a search of `run`'s messages for `query` (checked by the prompt).
    pub(super) fn search_messages(&mut self, run: String, query: String) {
        if self.tab != Tab::Activity {
            self.show_tab(Tab::Activity);
        }
        self.activity.search = Some(Search {
            run: run.clone(),
            query: query.clone(),
            loading: true,
            ..Search::default()
        });
        self.push(Effect::Call(Call::to::<()>(
            CallTag::Messages {
                run: run.clone(),
                query: query.clone(),
                cursor: None,
            },
            Method::GET,
            search_path(&run, &query, None),
            None,
        )));
    }

    pub(super) fn on_messages(
        &mut self,
        run: String,
        query: String,
        cursor: Option<String>,
        result: Result<serde_json::Value, String>,
    ) {
        let Some(s) = self.activity.search.as_mut() else {
            return;
        };
        if s.run != run || s.query != query {
            return;
        }
        let page = result.and_then(|v| {
            serde_json::from_value::<MessagePage>(v)
                .map_err(|e| format!("the messages of {run} are not what the contract says: {e}"))
        });
        s.on_page(cursor.as_deref(), page);
    }

    /// The pane's keys: they scroll the activity, or move among the matches (asking for the
    /// next page when the selection reaches the last one heard).
    pub(crate) fn activity_navigate(&mut self, action: Action) {
        let rows = self.activity.rows;
        match &mut self.activity.search {
            Some(s) => {
                if s.navigate(action, rows)
                    && let Some(cursor) = s.next.clone()
                {
                    s.loading = true;
                    let (run, query) = (s.run.clone(), s.query.clone());
                    let path = search_path(&run, &query, Some(&cursor));
                    self.push(Effect::Call(Call::to::<()>(
                        CallTag::Messages {
                            run,
                            query,
                            cursor: Some(cursor),
                        },
                        Method::GET,
                        path,
                        None,
                    )));
                }
            }
            None => match action {
                Action::NextMatch | Action::PrevMatch => {
                    let key = self
                        .keymap
                        .key_for(&self.contexts(), Action::SearchMessages)
                        .unwrap_or_else(|| "search-messages".into());
                    self.info(format!("no search: {key} searches the messages"));
                }
                _ => self.activity.scroll_by(action),
            },
        }
    }

    /// Shows the selected match's text in a dialog.
    pub(super) fn open_message(&mut self) {
        let Some(s) = &self.activity.search else {
            self.info("no message selected: search first");
            return;
        };
        let Some(m) = s.items.get(s.selected) else {
            self.info("no message found to show");
            return;
        };
        let d = crate::tui::widgets::message::MessageDialog::new(&s.run, m);
        self.open(Modal::Message(Box::new(d)));
    }

    /// Esc in the pane: the search goes, the activity shows again.
    pub(super) fn close_search(&mut self) {
        self.activity.search = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn activity(v: serde_json::Value) -> RunActivity {
        let mut base = serde_json::json!({
            "ref": "run-0001", "tool": "claude", "agents": [], "tasks": [], "tasks_omitted": 0,
            "files": [], "todos": [], "skills": [], "mcp_servers": [], "model": null,
            "context_tokens": null, "context_window": null, "context_percent": null,
            "compactions": 0, "transcript": "read"
        });
        for (k, x) in v.as_object().unwrap() {
            base[k] = x.clone();
        }
        serde_json::from_value(base).unwrap()
    }

    #[test]
    fn an_unknown_window_is_said_and_never_guessed() {
        let a = activity(serde_json::json!({"context_tokens": 90400}));
        let (_, s, pct) = context_line(&a);
        assert_eq!(s, "context 90,400 tokens · window unknown");
        assert_eq!(pct, None);
        let a = activity(serde_json::json!({}));
        assert!(context_line(&a).1.contains("unknown"));
    }

    #[test]
    fn a_known_window_gives_the_servers_percent() {
        let a = activity(serde_json::json!({
            "context_tokens": 50000, "context_window": 200000, "context_percent": 25.0
        }));
        let (role, s, pct) = context_line(&a);
        assert_eq!(s, "context 25% · 50,000 / 200,000 tokens");
        assert_eq!((role, pct), (Role::Text, Some(25.0)));
        // Codex reports a window and no percent: the share is of the reported figures.
        let a = activity(serde_json::json!({
            "tool": "codex", "context_tokens": 245000, "context_window": 272000
        }));
        let (role, s, _) = context_line(&a);
        assert_eq!(s, "context 90.1% · 245,000 / 272,000 tokens");
        assert_eq!(role, Role::Error);
    }

    #[test]
    fn the_transcript_state_is_shown_as_the_server_says() {
        for (t, word) in [
            ("read", "transcript read"),
            ("pending", "transcript pending"),
            ("missing", "transcript missing"),
            ("unreadable", "transcript unreadable: larger than 8 MiB"),
        ] {
            let a = activity(serde_json::json!({
                "transcript": t, "reason": if t == "unreadable" { serde_json::json!("larger than 8 MiB") } else { serde_json::Value::Null }
            }));
            assert!(model_line(&a).1.contains(word), "{t}: {}", model_line(&a).1);
        }
    }

    #[test]
    fn the_sections_hold_tasks_files_todos_and_agents() {
        let a = activity(serde_json::json!({
            "tasks": [{"id": "t1", "tool": "Bash", "command": "cargo test", "background": false,
                       "state": "failed", "exit_code": 101}],
            "tasks_omitted": 3,
            "files": [{"path": "src/a.rs", "added": 12, "removed": null, "created": true}],
            "todos": [{"content": "write the test", "status": "in_progress"}],
            "agents": [{"id": "a1", "description": "look around", "kind": "Explore",
                        "state": "running", "transcript": true}]
        }));
        let rows: Vec<String> = activity_rows(&a).into_iter().map(|r| r.text).collect();
        assert!(
            rows.contains(&"Tasks 1 (and 3 older)".to_string()),
            "{rows:?}"
        );
        assert!(rows.contains(&"  failed    Bash cargo test · exit 101".to_string()));
        assert!(
            rows.contains(&"  +12   −?    src/a.rs (new)".to_string()),
            "{rows:?}"
        );
        assert!(rows.contains(&"  [>] write the test".to_string()));
        assert!(rows.contains(&"  running   Explore look around".to_string()));
    }

    #[test]
    fn a_query_longer_than_256_bytes_is_refused_before_it_is_sent() {
        assert!(check_query(&"é".repeat(128)).is_ok());
        assert!(check_query(&"é".repeat(129)).unwrap_err().contains("256"));
        assert!(check_query("  ").is_err());
        let p = search_path("run-0001", "a b&c", Some("7"));
        assert!(p.contains("q=a%20b%26c"), "{p}");
        assert!(p.contains("role=all") && p.contains("text=1") && p.contains("cursor=7"));
        assert!(p.contains("limit=50"), "{p}");
    }

    fn item(id: u64) -> MessageItem {
        serde_json::from_value(serde_json::json!({
            "id": id, "role": "user", "at": "2026-01-02T03:04:05Z", "first_line": format!("m{id}")
        }))
        .unwrap()
    }

    #[test]
    fn the_search_pages_with_the_cursor_at_its_last_match() {
        let mut s = Search {
            run: "r".into(),
            query: "q".into(),
            loading: true,
            ..Search::default()
        };
        s.on_page(
            None,
            Ok(MessagePage {
                run_ref: "r".into(),
                items: vec![item(1), item(2)],
                total: Some(3),
                next: Some("3".into()),
                transcript: TranscriptState::Read,
                reason: None,
            }),
        );
        assert!(!s.navigate(Action::Up, 5));
        assert!(s.navigate(Action::NextMatch, 5), "the last heard: ask more");
        assert_eq!(s.selected, 1);
        s.loading = true;
        assert!(!s.navigate(Action::Down, 5), "one page at a time");
        s.on_page(
            Some("3"),
            Ok(MessagePage {
                run_ref: "r".into(),
                items: vec![item(3)],
                total: Some(3),
                next: None,
                transcript: TranscriptState::Read,
                reason: None,
            }),
        );
        assert_eq!(s.items.len(), 3);
        assert_eq!(s.selected, 1, "a page appended keeps the selection");
        assert!(!s.navigate(Action::Down, 5));
        assert_eq!(s.selected, 2);
        assert!(!s.navigate(Action::Down, 5), "no next: nothing to ask");
        assert_eq!(match_row(&s.items[0]), "#1    user      01-02 03:04  m1");
    }
}
