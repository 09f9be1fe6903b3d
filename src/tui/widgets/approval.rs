//! The publication-approval dialog: the cockpit's face of [`crate::publish::approve::run`]
//! (the same flow as `proctor publish approve`, driven through
//! [`crate::tui::approval::ModalPrompter`]).
//!
//! It takes the whole screen. It shows the text the flow gives it (every field that came from
//! the agent, the remote or the forge, already sanitised by the flow and sanitised again
//! here, each line bounded by the screen's width and wrapped, never cut), page by page when
//! it does not fit: Enter shows the next page, and the field opens only once every line was
//! on the screen. Then the operator types the full revision (echoed), and after it the
//! passphrase (masked: nothing shows its length).
//!
//! Its keys are fixed, not the keymap's, because they are its meaning: printable characters
//! are typed, Backspace erases one, Enter submits (or shows the next page), Esc and ctrl-c
//! refuse (the flow then writes its redacted receipt). **Paste and every other key are
//! ignored**: arrows, Tab, Home, Delete, function keys, ctrl and alt combinations never reach
//! a field. See [`classify`]. It is a [`Dialog`] like every other: a key answers
//! [`DialogOutcome::Continue`] while it stays open and [`DialogOutcome::Cancel`] when the
//! operator closed it (only once the flow ended, or with a second Esc before the first
//! question); it never submits, since its answers go to the flow's thread.

use std::fmt;
use std::sync::{Arc, Mutex, mpsc};

use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, BorderType, Borders, Clear};
use zeroize::Zeroizing;

use crate::publish::approve::{Outcome as FlowOutcome, PromptError};
use crate::text;
use crate::tui::keymap::Keymap;
use crate::tui::role::Role;
use crate::tui::theme::Theme;
use crate::tui::widgets::{Dialog, Outcome as DialogOutcome};

/// The longest answer taken, in bytes (as the terminal prompt's).
pub const MAX_ANSWER_BYTES: usize = crate::authority::tty::MAX_ANSWER_BYTES;

/// An answer for the flow's thread.
pub type Answer = Result<Zeroizing<String>, PromptError>;

/// Where an answer goes: the approval flow's thread waits on the other end. Dropping it
/// unanswered (the dialog closed, the cockpit ended) is a refusal there.
#[derive(Clone)]
pub struct Reply(Arc<Mutex<Option<mpsc::Sender<Answer>>>>);

impl Reply {
    pub fn new(tx: mpsc::Sender<Answer>) -> Reply {
        Reply(Arc::new(Mutex::new(Some(tx))))
    }

    /// Sends the answer (once; later answers are dropped). False when nobody waits.
    pub fn send(&self, answer: Answer) -> bool {
        let tx = match self.0.lock() {
            Ok(mut g) => g.take(),
            Err(_) => None,
        };
        tx.is_some_and(|tx| tx.send(answer).is_ok())
    }
}

impl PartialEq for Reply {
    fn eq(&self, other: &Reply) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }
}

impl fmt::Debug for Reply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Reply")
    }
}

/// Which answer is asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Revision,
    Passphrase,
    /// The demo's offer of a throwaway publish key: Enter accepts, Esc refuses.
    Offer,
    /// A new key's passphrase (masked), typed twice.
    NewPassphrase,
}

/// What a key means to the dialog. Anything but these is ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKey {
    /// A printable character (no ctrl, no alt; shift is how capitals are typed).
    Char(char),
    Backspace,
    Enter,
    /// Esc or ctrl-c: refuse.
    Abort,
    Ignored,
}

/// The only keys the dialog acts on. Releases, arrows, Tab, Home/End, Delete, Insert,
/// function keys, media keys, ctrl and alt combinations (but ctrl-c) are [`FieldKey::Ignored`],
/// as are control, invisible and bidi characters.
pub fn classify(key: &KeyEvent) -> FieldKey {
    if key.kind == KeyEventKind::Release {
        return FieldKey::Ignored;
    }
    let mods = key.modifiers;
    let plain = (mods - KeyModifiers::SHIFT).is_empty();
    match key.code {
        KeyCode::Esc if plain => FieldKey::Abort,
        KeyCode::Char('c' | 'C') if mods == KeyModifiers::CONTROL => FieldKey::Abort,
        KeyCode::Enter if plain => FieldKey::Enter,
        KeyCode::Backspace if plain => FieldKey::Backspace,
        KeyCode::Char(c)
            if plain && !c.is_control() && !text::is_invisible(c) && !text::is_bidi_control(c) =>
        {
            FieldKey::Char(c)
        }
        _ => FieldKey::Ignored,
    }
}

/// Where the flow stands.
#[derive(Debug)]
pub enum Stage {
    /// The server is being asked (the approval opened, the remote re-read, the candidate
    /// re-derived): no field yet.
    Checking,
    /// The operator's answer to `field` is awaited.
    Asking {
        field: Field,
        prompt: String,
        reply: Reply,
    },
    /// The answer went to the flow.
    Working(Field),
    /// The flow ended: published, or refused and named.
    Done(FlowOutcome),
}

/// The dialog's state.
pub struct Approval {
    /// The host whose intent and key these are, named in the title in a cockpit of several.
    pub host: Option<String>,
    pub intent: String,
    text: Option<String>,
    stage: Stage,
    value: Zeroizing<String>,
    abort_requested: bool,
    /// Set by a second Esc before the first question: close now.
    closing: bool,
    note: Option<String>,
    page: usize,
    /// Set with the layout of each frame ([`Dialog::lay_out`]): how many pages the text
    /// takes at the screen's size, and whether every line has been on the screen (the field
    /// opens only then).
    pages: usize,
    seen_all: bool,
}

impl fmt::Debug for Approval {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Approval")
            .field("intent", &self.intent)
            .field("stage", &self.stage)
            .field("typed", &self.value.chars().count())
            .finish_non_exhaustive()
    }
}

impl Approval {
    pub fn new(intent: impl Into<String>) -> Approval {
        Approval {
            host: None,
            intent: intent.into(),
            text: None,
            stage: Stage::Checking,
            value: Zeroizing::new(String::new()),
            abort_requested: false,
            closing: false,
            note: None,
            page: 0,
            pages: 1,
            seen_all: false,
        }
    }

    pub fn stage(&self) -> &Stage {
        &self.stage
    }

    /// What the field holds now (for tests: the dialog never shows a passphrase).
    pub fn typed(&self) -> &str {
        &self.value
    }

    /// Whether every line of the text has been on the screen.
    pub fn seen_all(&self) -> bool {
        self.seen_all
    }

    /// The flow's text (built by `approve::display`, sanitised there).
    pub fn show(&mut self, text: String) {
        self.text = Some(text);
        self.page = 0;
        self.seen_all = false;
    }

    /// A notice of the flow's own (proctor's text, not untrusted), shown as the note.
    pub fn notice(&mut self, text: String) {
        self.note = Some(text);
    }

    /// The flow asks for `field`. Answered at once with a refusal when the operator already
    /// pressed Esc.
    pub fn ask(&mut self, field: Field, prompt: String, reply: Reply) {
        self.value = Zeroizing::new(String::new());
        if self.abort_requested {
            reply.send(Err(PromptError::Aborted));
            self.stage = Stage::Working(field);
            return;
        }
        self.note = None;
        self.stage = Stage::Asking {
            field,
            prompt,
            reply,
        };
    }

    pub fn done(&mut self, outcome: FlowOutcome) {
        self.value = Zeroizing::new(String::new());
        self.note = None;
        self.stage = Stage::Done(outcome);
    }

    pub fn is_done(&self) -> bool {
        matches!(self.stage, Stage::Done(_))
    }

    /// The text at `w` columns: the lines pinned on every page (the header and the
    /// revision), and the rest, paged.
    fn split(&self, w: usize) -> (Vec<Styled>, Vec<Styled>) {
        match &self.text {
            Some(t) => split_text(t, w),
            None => (
                vec![(
                    Role::Dim,
                    "asking the server: re-reading the remote, re-deriving the candidate…"
                        .to_string(),
                )],
                Vec::new(),
            ),
        }
    }

    /// How the text is paged on `screen` (as [`Dialog::render`] draws it): `None` when the
    /// dialog shows no text there (too small, or the flow ended).
    fn page_plan(&self, screen: Rect) -> Option<PagePlan> {
        if screen.width == 0 || screen.height == 0 || matches!(self.stage, Stage::Done(_)) {
            return None;
        }
        let inner = Block::default()
            .borders(Borders::ALL)
            .inner(screen)
            .inner(ratatui::layout::Margin::new(1, 0));
        if inner.width < 4 || inner.height < 4 {
            return None;
        }
        let field_y = inner.y + inner.height - 3;
        let (pinned, rest) = self.split(usize::from(inner.width));
        let pinned_rows = pinned.len().min(usize::from(field_y - inner.y));
        let (_, pages) = paging(
            rest.len(),
            usize::from(field_y - inner.y).saturating_sub(pinned_rows),
        );
        Some(PagePlan {
            pages,
            shows_last: self.text.is_some() && self.page.min(pages - 1) + 1 >= pages,
        })
    }

    fn abort(&mut self) {
        match std::mem::replace(&mut self.stage, Stage::Checking) {
            Stage::Asking { field, reply, .. } => {
                self.value = Zeroizing::new(String::new());
                reply.send(Err(PromptError::Aborted));
                self.note = Some("refused: the refusal and its receipt are being recorded".into());
                self.stage = Stage::Working(field);
            }
            Stage::Checking if self.abort_requested => {
                // A second Esc while the server is still asked: the dialog closes; the flow's
                // questions are then refused and its end goes to the status line.
                self.closing = true;
            }
            Stage::Checking => {
                self.abort_requested = true;
                self.note = Some(
                    "refusing once the server answers (the refusal is recorded); Esc again \
                     closes this dialog"
                        .into(),
                );
            }
            Stage::Working(field @ (Field::Offer | Field::NewPassphrase)) => {
                self.abort_requested = true;
                self.note = Some("refusing at the next step".into());
                self.stage = Stage::Working(field);
            }
            Stage::Working(Field::Revision) => {
                self.abort_requested = true;
                self.note = Some("refusing at the next step".into());
                self.stage = Stage::Working(Field::Revision);
            }
            other => {
                self.note = Some(
                    "the authorisation is being spent: this step cannot be interrupted".into(),
                );
                self.stage = other;
            }
        }
    }

    fn enter(&mut self) {
        let Stage::Asking { field, .. } = &self.stage else {
            return;
        };
        let field = *field;
        if !self.seen_all {
            self.page = (self.page + 1).min(self.pages.saturating_sub(1));
            self.note = None;
            return;
        }
        if self.value.is_empty() && field != Field::Offer {
            self.note = Some(match field {
                Field::Revision => "type the full revision shown above, or Esc to refuse".into(),
                Field::Passphrase => "type your publish key's passphrase, or Esc to refuse".into(),
                Field::NewPassphrase | Field::Offer => {
                    "choose a passphrase for the demo key, or Esc to refuse".into()
                }
            });
            return;
        }
        let answer = match field {
            Field::Offer => Zeroizing::new("yes".to_string()),
            _ => std::mem::replace(&mut self.value, Zeroizing::new(String::new())),
        };
        if let Stage::Asking { reply, .. } =
            std::mem::replace(&mut self.stage, Stage::Working(field))
        {
            reply.send(Ok(answer));
        }
        self.note = None;
    }
}

/// The approval's keys are its own (see the module's documentation): the keymap is not
/// consulted.
impl Dialog for Approval {
    type Output = ();

    /// Pasted text never reaches a field.
    fn handle_paste(&mut self, _text: &str) {
        self.note = Some("paste is ignored here: type it".into());
    }

    fn handle_key(&mut self, key: &KeyEvent, _keymap: &Keymap) -> DialogOutcome<()> {
        let k = classify(key);
        if let Stage::Done(_) = self.stage {
            return match k {
                FieldKey::Enter | FieldKey::Abort => DialogOutcome::Cancel,
                _ => DialogOutcome::Continue,
            };
        }
        match k {
            FieldKey::Abort => {
                self.abort();
                if self.closing {
                    return DialogOutcome::Cancel;
                }
            }
            FieldKey::Ignored => {
                if key.kind != KeyEventKind::Release {
                    self.note = Some(
                        "only characters, Backspace, Enter and Esc work here; that key is ignored"
                            .into(),
                    );
                }
            }
            FieldKey::Enter => self.enter(),
            FieldKey::Backspace => {
                if matches!(self.stage, Stage::Asking { .. }) {
                    self.value.pop();
                    self.note = None;
                }
            }
            FieldKey::Char(c) => {
                if !matches!(self.stage, Stage::Asking { .. }) {
                    return DialogOutcome::Continue;
                }
                if !self.seen_all {
                    self.note = Some("read every line first: Enter shows the next page".into());
                } else if matches!(
                    self.stage,
                    Stage::Asking {
                        field: Field::Offer,
                        ..
                    }
                ) {
                    self.note = Some("Enter creates the demo key; Esc refuses".into());
                } else if self.value.len() + c.len_utf8() > MAX_ANSWER_BYTES {
                    self.note = Some(format!("at most {MAX_ANSWER_BYTES} bytes"));
                } else {
                    self.value.push(c);
                    self.note = None;
                }
            }
        }
        DialogOutcome::Continue
    }

    /// The text's pages at this size, and whether the page shown now is the last: once it
    /// is, every line has been on the screen and the field opens.
    fn lay_out(&mut self, screen: Rect) {
        if let Some(plan) = self.page_plan(screen) {
            self.pages = plan.pages;
            if plan.shows_last {
                self.seen_all = true;
            }
        }
    }

    /// Draws the dialog over the whole screen.
    fn render(&self, frame: &mut Frame, screen: Rect, theme: &Theme, _keymap: &Keymap) {
        if screen.width == 0 || screen.height == 0 {
            return;
        }
        frame.render_widget(Clear, screen);
        let seen_all = self.seen_all || self.page_plan(screen).is_some_and(|p| p.shows_last);
        let title = match &self.host {
            // A cockpit of several hosts: the dialog names the host whose key signs (this
            // machine's: a remote host's intent is refused before any dialog).
            Some(h) => format!(
                " Authorise publication {} on host {} (this machine's key) ",
                text::one_line(&self.intent, 24),
                text::one_line(h, 24)
            ),
            None => format!(
                " Authorise publication {} ",
                text::one_line(&self.intent, 24)
            ),
        };
        let block = Block::default()
            .borders(Borders::ALL)
            .border_type(BorderType::Double)
            .border_style(theme.style(Role::Modal))
            .style(theme.style(Role::Text))
            .title(Line::from(Span::styled(
                text::one_line(&title, usize::from(screen.width.saturating_sub(4))),
                theme.style(Role::Title),
            )));
        let inner = block.inner(screen);
        frame.render_widget(block, screen);
        let inner = inner.inner(ratatui::layout::Margin::new(1, 0));
        if inner.width < 4 || inner.height < 4 {
            return;
        }
        let w = usize::from(inner.width);
        let buf = frame.buffer_mut();
        let mut put = |y: u16, line: Line| {
            buf.set_line(inner.x, y, &line, inner.width);
        };
        // The bottom: the field (or the outcome's hint), a note, the keys.
        let bottom = inner.y + inner.height;
        let hint_y = bottom - 1;
        let note_y = bottom - 2;
        let field_y = bottom - 3;
        let top = inner.y;

        if let Stage::Done(outcome) = &self.stage {
            let lines = outcome_lines(outcome);
            let mut y = top;
            for (role, l) in lines {
                for part in wrap(&l, w, 4) {
                    if y >= field_y {
                        break;
                    }
                    put(y, Line::from(Span::styled(part, theme.style(role))));
                    y += 1;
                }
            }
            put(
                hint_y,
                keys_line(theme, &[("enter", "close"), ("esc", "close")]),
            );
            return;
        }

        // The text: the header and the revision pinned on every page, the rest paged.
        let (pinned, rest) = self.split(w);
        let mut y = top;
        for (role, l) in &pinned {
            if y >= field_y {
                break;
            }
            put(y, Line::from(Span::styled(l.clone(), theme.style(*role))));
            y += 1;
        }
        let (per_page, pages) = paging(rest.len(), usize::from(field_y.saturating_sub(y)));
        let page = self.page.min(pages - 1);
        // The last page is a full one: it ends with the text's last line.
        let first = (page * per_page).min(rest.len().saturating_sub(per_page));
        for (role, l) in rest.iter().skip(first).take(per_page) {
            if y >= field_y {
                break;
            }
            put(y, Line::from(Span::styled(l.clone(), theme.style(*role))));
            y += 1;
        }
        if pages > 1 && field_y > top {
            let msg = if page + 1 < pages {
                format!("page {}/{pages}: Enter shows the next page", page + 1)
            } else {
                format!("page {pages}/{pages}")
            };
            put(
                field_y - 1,
                Line::from(Span::styled(msg, theme.style(Role::Warning))),
            );
        }

        // The field.
        match &self.stage {
            Stage::Asking { field, prompt, .. } => {
                let label = text::one_line(prompt, w / 2);
                let shown = match field {
                    Field::Revision => {
                        text::one_line(&self.value, w.saturating_sub(label.len() + 2))
                    }
                    Field::Offer => String::new(),
                    Field::Passphrase | Field::NewPassphrase if self.value.is_empty() => {
                        String::new()
                    }
                    Field::Passphrase | Field::NewPassphrase => "(hidden)".to_string(),
                };
                let mut spans = vec![Span::styled(label, theme.style(Role::Key))];
                if seen_all {
                    spans.push(Span::styled(shown, theme.style(Role::Input)));
                    spans.push(Span::styled("▏", theme.style(Role::Input)));
                } else {
                    spans.push(Span::styled(
                        "(read every page first)",
                        theme.style(Role::Dim),
                    ));
                }
                put(field_y, Line::from(spans));
            }
            Stage::Working(Field::Revision) => put(
                field_y,
                Line::from(Span::styled(
                    "comparing the revision…",
                    theme.style(Role::Dim),
                )),
            ),
            Stage::Working(Field::Offer | Field::NewPassphrase) => put(
                field_y,
                Line::from(Span::styled(
                    "creating the demo key: deriving its encryption key, registering it…",
                    theme.style(Role::Warning),
                )),
            ),
            Stage::Working(Field::Passphrase) => put(
                field_y,
                Line::from(Span::styled(
                    "decrypting the key, minting and spending the authorisation, publishing…",
                    theme.style(Role::Warning),
                )),
            ),
            Stage::Checking | Stage::Done(_) => {}
        }
        if let Some(n) = &self.note {
            put(
                note_y,
                Line::from(Span::styled(
                    text::one_line(n, w),
                    theme.style(Role::Warning),
                )),
            );
        }
        if let Stage::Asking {
            field: Field::Offer,
            ..
        } = &self.stage
        {
            put(
                hint_y,
                keys_line(
                    theme,
                    &[("enter", "create the demo key"), ("esc", "refuse")],
                ),
            );
            return;
        }
        put(
            hint_y,
            keys_line(
                theme,
                &[
                    ("enter", "submit"),
                    ("esc", "refuse"),
                    ("backspace", "erase"),
                    ("paste, arrows, other keys", "ignored"),
                ],
            ),
        );
    }
}

fn keys_line(theme: &Theme, pairs: &[(&str, &str)]) -> Line<'static> {
    let mut spans = Vec::new();
    for (i, (k, what)) in pairs.iter().enumerate() {
        if i > 0 {
            spans.push(Span::styled("  ", theme.style(Role::Dim)));
        }
        spans.push(Span::styled((*k).to_string(), theme.style(Role::Key)));
        spans.push(Span::styled(format!(" {what}"), theme.style(Role::Dim)));
    }
    Line::from(spans)
}

/// A line of the dialog and its role.
type Styled = (Role, String);

/// The outcome, in words, each part through the sanitiser.
fn outcome_lines(o: &FlowOutcome) -> Vec<(Role, String)> {
    let one = |s: &str| text::one_line(s, 400);
    match o {
        FlowOutcome::Published {
            intent,
            revision,
            branch,
            pull_request,
            receipt,
        } => vec![
            (Role::Success, format!("PUBLISHED {}", one(intent))),
            (
                Role::Text,
                format!("pushed        {} to {}", one(revision), one(branch)),
            ),
            (
                Role::Text,
                format!(
                    "pull request  #{} {}",
                    pull_request.number,
                    one(&pull_request.html_url)
                ),
            ),
            (
                if receipt.signed {
                    Role::Text
                } else {
                    Role::Warning
                },
                format!(
                    "receipt       {} ({})",
                    one(&receipt.path.to_string_lossy()),
                    if receipt.signed {
                        "signed, with its SSHSIG beside it"
                    } else {
                        "NOT signed: the publication happened, its receipt is unsigned"
                    }
                ),
            ),
            (
                Role::Dim,
                "proctor cannot merge: the pull request waits for the forge's own review."
                    .to_string(),
            ),
        ],
        FlowOutcome::Refused {
            code,
            message,
            receipt,
        } => {
            let mut v = vec![(Role::Error, format!("REFUSED ({})", one(code)))];
            for l in text::multi_line_capped(message, 400).lines() {
                v.push((Role::Text, l.to_string()));
            }
            v.push(match receipt {
                Some(r) => (
                    Role::Text,
                    format!("receipt       {}", one(&r.path.to_string_lossy())),
                ),
                None => (
                    Role::Warning,
                    "no receipt: the server reserved none (nothing was opened)".to_string(),
                ),
            });
            v
        }
    }
}

/// The flow's text cut into screen lines: (pinned, rest). The first line (the intent and its
/// state) and the revision line stay on every page; every line is sanitised again and
/// wrapped at `width` (never cut).
/// How the text is paged on a screen.
struct PagePlan {
    pages: usize,
    /// The page shown is the last.
    shows_last: bool,
}

/// The rows per page and the pages of `rest` rows in `avail` rows (one row for the page line
/// when there is more than one page).
fn paging(rest: usize, avail: usize) -> (usize, usize) {
    if rest <= avail {
        (avail.max(1), 1)
    } else {
        let per = avail.saturating_sub(1).max(1);
        (per, rest.div_ceil(per))
    }
}

fn split_text(t: &str, width: usize) -> (Vec<Styled>, Vec<Styled>) {
    let mut pinned = Vec::new();
    let mut rest = Vec::new();
    let mut header_done = false;
    let mut last_blank = true;
    for raw in t.lines() {
        let line = text::one_line(raw, usize::MAX);
        if line.trim().is_empty() {
            if !last_blank {
                rest.push((Role::Text, String::new()));
            }
            last_blank = true;
            continue;
        }
        last_blank = false;
        let indent = value_indent(&line);
        let parts = wrap(&line, width, indent);
        if !header_done {
            header_done = true;
            pinned.extend(parts.into_iter().map(|p| (Role::Title, p)));
        } else if line.trim_start().starts_with("revision ") {
            pinned.extend(parts.into_iter().map(|p| (Role::Highlight, p)));
        } else {
            rest.extend(parts.into_iter().map(|p| (Role::Text, p)));
        }
    }
    while rest.last().is_some_and(|(_, l)| l.is_empty()) {
        rest.pop();
    }
    (pinned, rest)
}

/// Where a field line's value starts (`  label      value`), for its continuation lines;
/// 0 for a line of prose (it starts at the margin).
fn value_indent(line: &str) -> usize {
    let lead = line.len() - line.trim_start().len();
    if lead == 0 {
        return 0;
    }
    let after = &line[lead..];
    match after.find(' ') {
        Some(i) => {
            let rest = &after[i..];
            let spaces = rest.len() - rest.trim_start().len();
            (lead + i + spaces).min(16)
        }
        None => lead,
    }
}

/// `line` cut into rows of at most `width` columns (at spaces, inside a word only when it
/// is longer than a row), continuation rows indented by `indent`: nothing is dropped. The
/// leading spaces of a field line are kept.
fn wrap(line: &str, width: usize, indent: usize) -> Vec<String> {
    let lead = line.len() - line.trim_start().len();
    let lead = lead.min(width / 2);
    let pad = " ".repeat(lead);
    crate::tui::ui::wrap(
        line.trim_start(),
        width.saturating_sub(lead),
        indent.saturating_sub(lead),
    )
    .into_iter()
    .map(|r| format!("{pad}{r}"))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::widgets::testing::{ch, ctrl, key};

    #[test]
    fn only_printables_backspace_enter_and_esc_mean_anything() {
        assert_eq!(classify(&ch('a')), FieldKey::Char('a'));
        assert_eq!(classify(&ch('F')), FieldKey::Char('F'));
        assert_eq!(classify(&ch('é')), FieldKey::Char('é'));
        assert_eq!(classify(&key(KeyCode::Backspace)), FieldKey::Backspace);
        assert_eq!(classify(&key(KeyCode::Enter)), FieldKey::Enter);
        assert_eq!(classify(&key(KeyCode::Esc)), FieldKey::Abort);
        assert_eq!(classify(&ctrl('c')), FieldKey::Abort);
        for k in [
            key(KeyCode::Left),
            key(KeyCode::Right),
            key(KeyCode::Up),
            key(KeyCode::Down),
            key(KeyCode::Home),
            key(KeyCode::End),
            key(KeyCode::Tab),
            key(KeyCode::BackTab),
            key(KeyCode::Delete),
            key(KeyCode::Insert),
            key(KeyCode::PageUp),
            key(KeyCode::F(1)),
            key(KeyCode::Null),
            ctrl('u'),
            ctrl('v'),
            ctrl('w'),
            KeyEvent::new(KeyCode::Char('x'), KeyModifiers::ALT),
            KeyEvent::new(KeyCode::Char('\u{202e}'), KeyModifiers::NONE),
            KeyEvent::new(KeyCode::Char('\u{200b}'), KeyModifiers::NONE),
            KeyEvent::new(KeyCode::Char('\u{1b}'), KeyModifiers::NONE),
            KeyEvent::new(KeyCode::Enter, KeyModifiers::ALT),
        ] {
            assert_eq!(classify(&k), FieldKey::Ignored, "{k:?}");
        }
        let mut release = ch('a');
        release.kind = KeyEventKind::Release;
        assert_eq!(classify(&release), FieldKey::Ignored);
    }

    fn screen(a: &mut Approval) -> String {
        a.lay_out(Rect::new(0, 0, 100, 24));
        let mut t = ratatui::Terminal::new(ratatui::backend::TestBackend::new(100, 24)).unwrap();
        t.draw(|f| a.render(f, f.area(), &Theme::default_theme(), &Keymap::defaults()))
            .unwrap();
        let buf = t.backend().buffer().clone();
        (0..buf.area.height)
            .map(|y| {
                (0..buf.area.width)
                    .map(|x| buf[(x, y)].symbol().to_string())
                    .collect::<String>()
                    + "\n"
            })
            .collect()
    }

    #[test]
    fn the_demo_key_offer_takes_enter_or_esc_and_its_passphrase_is_masked() {
        let mut a = Approval::new("int-0001");
        a.show("\nA demo publish key\n\nEnter creates it; Esc refuses.\n".into());
        let (tx, rx) = mpsc::channel();
        a.ask(Field::Offer, "Create the demo key? ".into(), Reply::new(tx));
        let s = screen(&mut a);
        assert!(s.contains("Create the demo key? ▏"), "{s}");
        assert!(s.contains("enter create the demo key"), "{s}");
        // A character is not an answer; Enter is "yes".
        a.handle_key(&ch('n'), &Keymap::defaults());
        assert!(rx.try_recv().is_err());
        assert_eq!(a.typed(), "");
        a.handle_key(&key(KeyCode::Enter), &Keymap::defaults());
        assert_eq!(rx.try_recv().unwrap().unwrap().as_str(), "yes");
        assert!(screen(&mut a).contains("creating the demo key"));
        // The new passphrase: masked, never shown, sent as typed.
        let (tx, rx) = mpsc::channel();
        a.ask(
            Field::NewPassphrase,
            "New passphrase: ".into(),
            Reply::new(tx),
        );
        a.handle_key(&key(KeyCode::Enter), &Keymap::defaults());
        assert!(rx.try_recv().is_err(), "an empty passphrase is not sent");
        for c in "secret words here".chars() {
            a.handle_key(&ch(c), &Keymap::defaults());
        }
        let s = screen(&mut a);
        assert!(s.contains("New passphrase: (hidden)▏"), "{s}");
        assert!(!s.contains("secret"), "{s}");
        a.handle_key(&key(KeyCode::Enter), &Keymap::defaults());
        assert_eq!(
            rx.try_recv().unwrap().unwrap().as_str(),
            "secret words here"
        );
        // Esc at the offer refuses.
        let (tx, rx) = mpsc::channel();
        a.ask(Field::Offer, "Create the demo key? ".into(), Reply::new(tx));
        a.handle_key(&key(KeyCode::Esc), &Keymap::defaults());
        assert!(matches!(rx.try_recv().unwrap(), Err(PromptError::Aborted)));
    }

    #[test]
    fn wrapping_keeps_every_character_within_the_width() {
        use unicode_width::UnicodeWidthStr;
        let url = format!("https://forge.test/{}⟨U+202E⟩x", "y".repeat(90));
        let line = format!("  remote     origin {url}");
        for width in [20, 40, 78, 158] {
            let rows = wrap(&line, width, value_indent(&line));
            assert!(rows.iter().all(|r| r.width() <= width), "{width}: {rows:?}");
            let words: String = rows.iter().flat_map(|r| r.split_whitespace()).collect();
            let want: String = line.split_whitespace().collect();
            assert_eq!(words, want, "{width}");
        }
        assert_eq!(value_indent("  title      x"), 13);
        assert_eq!(value_indent("If you authorise, proctor"), 0);
    }
}
