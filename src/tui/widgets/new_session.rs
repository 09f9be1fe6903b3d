//! The new-session form: profile (from the list the server gave), workspace (an absolute
//! folder), transport (pty for a live terminal, pipe for the tool's stdio protocol) and an
//! optional first prompt. Tab and Shift-Tab (and the arrows up and down) move between
//! fields; Left and Right change the profile and the transport; Enter starts the session.
//! Each field's mistake is shown under it; the server's refusal (set with
//! [`NewSessionForm::set_error`]) too.

use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent};
use ratatui::layout::{Margin, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use super::input::{Edit, TextInput};
use super::prompt::Validator;
use super::{Dialog, Outcome, centered, frame_dialog, hint_line, is_press, row_style, typed_char};
use crate::providers::Transport;
use crate::tui::action::Action;
use crate::tui::keymap::{Context, Keymap};
use crate::tui::role::Role;
use crate::tui::theme::Theme;

const CONTEXTS: &[Context] = &[Context::Modal];
const LABEL_WIDTH: u16 = 15;

/// What the form asks the server for (`POST /runs`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSession {
    pub profile: String,
    pub workspace: String,
    pub transport: Transport,
    /// The first prompt; `None` when left empty.
    pub prompt: Option<String>,
}

/// A field of the form.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Profile,
    Workspace,
    Transport,
    Prompt,
}

impl Field {
    pub const ALL: [Field; 4] = [
        Field::Profile,
        Field::Workspace,
        Field::Transport,
        Field::Prompt,
    ];

    fn label(self) -> &'static str {
        match self {
            Field::Profile => "Profile",
            Field::Workspace => "Workspace",
            Field::Transport => "Transport",
            Field::Prompt => "First prompt",
        }
    }
}

/// The new-session form.
pub struct NewSessionForm {
    profiles: Vec<String>,
    profile: usize,
    workspace: TextInput,
    transport: Transport,
    prompt: TextInput,
    focus: Field,
    errors: [Option<String>; 4],
    /// A refusal not tied to one field (e.g. from the server).
    error: Option<String>,
    workspace_check: Option<Validator>,
}

impl std::fmt::Debug for NewSessionForm {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NewSessionForm")
            .field("profiles", &self.profiles)
            .field("profile", &self.profile)
            .field("workspace", &self.workspace.value())
            .field("transport", &self.transport)
            .field("prompt", &self.prompt.value())
            .field("focus", &self.focus)
            .field("errors", &self.errors)
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

impl NewSessionForm {
    /// A form over `profiles` (the first is chosen), with `workspace` filled in (e.g. the
    /// cockpit's current folder) and the pty transport.
    pub fn new(profiles: Vec<String>, workspace: &str) -> NewSessionForm {
        NewSessionForm {
            profiles,
            profile: 0,
            workspace: TextInput::new(workspace),
            transport: crate::providers::DEFAULT_TRANSPORT,
            prompt: TextInput::default(),
            focus: Field::Profile,
            errors: Default::default(),
            error: None,
            workspace_check: None,
        }
    }

    /// The transport the form will start with.
    pub fn transport(&self) -> Transport {
        self.transport
    }

    pub fn with_transport(mut self, transport: Transport) -> NewSessionForm {
        self.transport = transport;
        self
    }

    /// Chooses the profile named `name`, if it is in the list.
    pub fn with_profile(mut self, name: &str) -> NewSessionForm {
        if let Some(i) = self.profiles.iter().position(|p| p == name) {
            self.profile = i;
        }
        self
    }

    /// An extra check of the workspace (e.g. that the folder exists, when the server is on
    /// this machine), after the form's own (not empty, absolute).
    pub fn with_workspace_validator(mut self, check: Validator) -> NewSessionForm {
        self.workspace_check = Some(check);
        self
    }

    /// Shows `message` under `field`, or above the keys when `None` (a refusal of the whole
    /// request).
    pub fn set_error(&mut self, field: Option<Field>, message: impl Into<String>) {
        match field {
            Some(f) => {
                self.errors[f as usize] = Some(message.into());
                self.focus = f;
            }
            None => self.error = Some(message.into()),
        }
    }

    pub fn focus(&self) -> Field {
        self.focus
    }

    pub fn field_error(&self, field: Field) -> Option<&str> {
        self.errors[field as usize].as_deref()
    }

    fn move_focus(&mut self, by: isize) {
        let i = Field::ALL
            .iter()
            .position(|f| *f == self.focus)
            .unwrap_or(0);
        let n = Field::ALL.len() as isize;
        self.focus = Field::ALL[((i as isize + by).rem_euclid(n)) as usize];
    }

    fn input_mut(&mut self) -> Option<&mut TextInput> {
        match self.focus {
            Field::Workspace => Some(&mut self.workspace),
            Field::Prompt => Some(&mut self.prompt),
            _ => None,
        }
    }

    fn validate(&mut self) -> Option<NewSession> {
        self.errors = Default::default();
        self.error = None;
        let profile = self.profiles.get(self.profile).cloned();
        if profile.is_none() {
            self.errors[Field::Profile as usize] =
                Some("no profile to run: add one with `proctor profile add`".to_owned());
        }
        let workspace = self.workspace.value().trim().to_owned();
        let workspace_error = if workspace.is_empty() {
            Some("a workspace folder is required".to_owned())
        } else if !workspace.starts_with('/') {
            Some("the workspace is an absolute path (it starts with /)".to_owned())
        } else {
            self.workspace_check
                .as_ref()
                .and_then(|check| check(&workspace).err())
        };
        self.errors[Field::Workspace as usize] = workspace_error;
        if let Some(first) = Field::ALL
            .iter()
            .find(|f| self.errors[**f as usize].is_some())
        {
            self.focus = *first;
            return None;
        }
        let prompt = self.prompt.value().trim();
        Some(NewSession {
            profile: profile.unwrap_or_default(),
            workspace,
            transport: self.transport,
            prompt: (!prompt.is_empty()).then(|| prompt.to_owned()),
        })
    }
}

impl Dialog for NewSessionForm {
    type Output = NewSession;

    fn handle_paste(&mut self, text: &str) {
        let focus = self.focus;
        if let Some(input) = self.input_mut()
            && input.insert_str(text)
        {
            self.errors[focus as usize] = None;
        }
    }

    fn handle_key(&mut self, key: &KeyEvent, keymap: &Keymap) -> Outcome<NewSession> {
        if !is_press(key) {
            return Outcome::Continue;
        }
        let focus = self.focus;
        if let Some(input) = self.input_mut() {
            match input.handle_key(key) {
                Edit::Changed => {
                    self.errors[focus as usize] = None;
                    self.error = None;
                    return Outcome::Continue;
                }
                Edit::Moved => return Outcome::Continue,
                Edit::Ignored => {}
            }
        }
        match (focus, key.code, typed_char(key)) {
            (Field::Profile, KeyCode::Left, _) if !self.profiles.is_empty() => {
                self.profile = (self.profile + self.profiles.len() - 1) % self.profiles.len();
                return Outcome::Continue;
            }
            (Field::Profile, KeyCode::Right, _) if !self.profiles.is_empty() => {
                self.profile = (self.profile + 1) % self.profiles.len();
                return Outcome::Continue;
            }
            (Field::Profile, _, Some(c)) => {
                // Type-ahead: the next profile starting with that letter.
                let n = self.profiles.len();
                let c = c.to_lowercase().to_string();
                if let Some(i) = (1..=n)
                    .map(|k| (self.profile + k) % n)
                    .find(|&i| self.profiles[i].to_lowercase().starts_with(&c))
                {
                    self.profile = i;
                }
                return Outcome::Continue;
            }
            (Field::Transport, KeyCode::Left | KeyCode::Right, _)
            | (Field::Transport, _, Some(' ')) => {
                self.transport = match self.transport {
                    Transport::Pty => Transport::Pipe,
                    Transport::Pipe => Transport::Pty,
                };
                return Outcome::Continue;
            }
            _ => {}
        }
        match keymap.resolve(CONTEXTS, key) {
            Some(Action::Confirm) => match self.validate() {
                Some(request) => Outcome::Submit(request),
                None => Outcome::Continue,
            },
            Some(Action::Escape) => Outcome::Cancel,
            Some(Action::FocusNext | Action::Down) => {
                self.move_focus(1);
                Outcome::Continue
            }
            Some(Action::FocusPrev | Action::Up) => {
                self.move_focus(-1);
                Outcome::Continue
            }
            _ => Outcome::Continue,
        }
    }

    fn render(&self, frame: &mut Frame, screen: Rect, theme: &Theme, keymap: &Keymap) {
        let width = screen.width.saturating_sub(4).clamp(40, 84);
        let error_rows = self.errors.iter().flatten().count() as u16;
        let height = 2 + 1 + 4 + error_rows + 2 * u16::from(self.error.is_some()) + 1 + 1;
        let rect = centered(screen, width, height);
        let inner = frame_dialog(frame, rect, "New session", theme).inner(Margin::new(1, 0));
        if inner.height < 6 || inner.width <= LABEL_WIDTH + 4 {
            return;
        }
        let field_x = inner.x + LABEL_WIDTH;
        let field_w = inner.width - LABEL_WIDTH;
        let bottom = inner.y + inner.height;
        let mut y = inner.y + 1;
        for field in Field::ALL {
            if y >= bottom.saturating_sub(1) {
                break;
            }
            let focused = self.focus == field;
            let label = format!("{} {}", if focused { "▸" } else { " " }, field.label());
            let label_style = if focused {
                theme.style(Role::Title)
            } else {
                theme.style(Role::Text)
            };
            frame.render_widget(
                Paragraph::new(Span::styled(label, label_style)),
                Rect::new(inner.x, y, LABEL_WIDTH, 1),
            );
            let area = Rect::new(field_x, y, field_w, 1);
            match field {
                Field::Profile => {
                    let line = match self.profiles.get(self.profile) {
                        Some(p) => Line::from(vec![
                            Span::styled("‹ ", theme.style(Role::Dim)),
                            Span::styled(
                                crate::text::one_line(p, usize::from(field_w.saturating_sub(12))),
                                row_style(theme, Role::Input, focused),
                            ),
                            Span::styled(" ›", theme.style(Role::Dim)),
                            Span::styled(
                                format!("  {} of {}", self.profile + 1, self.profiles.len()),
                                theme.style(Role::Dim),
                            ),
                        ]),
                        None => Line::from(Span::styled("(none)", theme.style(Role::Dim))),
                    };
                    frame.render_widget(Paragraph::new(line), area);
                }
                Field::Workspace => {
                    self.workspace
                        .render(frame, area, theme.style(Role::Input), focused);
                }
                Field::Transport => {
                    let choice = |t: Transport, what: &str| {
                        let on = self.transport == t;
                        let mark = if on { "(•)" } else { "( )" };
                        Span::styled(
                            format!("{mark} {} {what}", t.name()),
                            row_style(
                                theme,
                                if on { Role::Text } else { Role::Dim },
                                on && focused,
                            ),
                        )
                    };
                    frame.render_widget(
                        Paragraph::new(Line::from(vec![
                            choice(Transport::Pty, "(live terminal)"),
                            Span::raw("  "),
                            choice(Transport::Pipe, "(stdio protocol)"),
                        ])),
                        area,
                    );
                }
                Field::Prompt => {
                    self.prompt
                        .render(frame, area, theme.style(Role::Input), focused);
                }
            }
            y += 1;
            if let Some(e) = &self.errors[field as usize]
                && y < bottom
            {
                frame.render_widget(
                    Paragraph::new(Span::styled(
                        crate::text::one_line(e, usize::from(field_w)),
                        theme.style(Role::Error),
                    )),
                    Rect::new(field_x, y, field_w, 1),
                );
                y += 1;
            }
        }
        if let Some(e) = &self.error
            && y + 1 < bottom
        {
            frame.render_widget(
                Paragraph::new(Span::styled(
                    crate::text::one_line(e, usize::from(inner.width)),
                    theme.style(Role::Error),
                )),
                Rect::new(inner.x, y + 1, inner.width, 1),
            );
        }
        let hints = hint_line(
            &[
                (
                    keymap
                        .key_for(CONTEXTS, Action::FocusNext)
                        .unwrap_or_default(),
                    "next field",
                ),
                ("left/right".to_owned(), "change"),
                (
                    keymap
                        .key_for(CONTEXTS, Action::Confirm)
                        .unwrap_or_default(),
                    "start",
                ),
                (
                    keymap.key_for(CONTEXTS, Action::Escape).unwrap_or_default(),
                    "cancel",
                ),
            ],
            theme,
        );
        frame.render_widget(
            Paragraph::new(hints),
            Rect::new(inner.x, bottom - 1, inner.width, 1),
        );
    }
}

#[cfg(test)]
mod tests {
    use ratatui::crossterm::event::KeyModifiers;
    use ratatui::style::{Color, Modifier};

    use super::super::testing::{SIZES, assert_no_controls, ch, draw, find, key};
    use super::*;

    fn profiles() -> Vec<String> {
        ["claude", "codex", "gemini", "grok", "opencode"]
            .map(String::from)
            .to_vec()
    }

    fn type_str(f: &mut NewSessionForm, km: &Keymap, s: &str) {
        for c in s.chars() {
            f.handle_key(&ch(c), km);
        }
    }

    #[test]
    fn filling_the_form() {
        let km = Keymap::defaults();
        let mut f = NewSessionForm::new(profiles(), "/home/op/src/proctor");
        assert_eq!(f.focus(), Field::Profile);
        f.handle_key(&key(KeyCode::Right), &km);
        f.handle_key(&key(KeyCode::Right), &km);
        f.handle_key(&key(KeyCode::Left), &km);
        // Type-ahead: g goes to gemini, g again to grok.
        f.handle_key(&ch('g'), &km);
        f.handle_key(&ch('g'), &km);
        f.handle_key(&key(KeyCode::Tab), &km);
        assert_eq!(f.focus(), Field::Workspace);
        for _ in 0.."proctor".len() {
            f.handle_key(&key(KeyCode::Backspace), &km);
        }
        type_str(&mut f, &km, "web");
        f.handle_key(&key(KeyCode::Down), &km);
        assert_eq!(f.focus(), Field::Transport);
        f.handle_key(&ch(' '), &km);
        f.handle_key(&key(KeyCode::Tab), &km);
        assert_eq!(f.focus(), Field::Prompt);
        type_str(&mut f, &km, "  fix the flaky test q ");
        assert_eq!(
            f.handle_key(&key(KeyCode::Enter), &km),
            Outcome::Submit(NewSession {
                profile: "grok".to_owned(),
                workspace: "/home/op/src/web".to_owned(),
                transport: Transport::Pipe,
                prompt: Some("fix the flaky test q".to_owned()),
            })
        );
        // Shift-tab wraps around backwards; Esc cancels.
        let mut f = NewSessionForm::new(profiles(), "/w");
        f.handle_key(&KeyEvent::new(KeyCode::BackTab, KeyModifiers::SHIFT), &km);
        assert_eq!(f.focus(), Field::Prompt);
        assert_eq!(
            f.handle_key(&key(KeyCode::Enter), &km),
            Outcome::Submit(NewSession {
                profile: "claude".to_owned(),
                workspace: "/w".to_owned(),
                transport: Transport::Pty,
                prompt: None,
            })
        );
        assert_eq!(f.handle_key(&key(KeyCode::Esc), &km), Outcome::Cancel);
    }

    #[test]
    fn mistakes_are_shown_in_place() {
        let km = Keymap::defaults();
        let mut f = NewSessionForm::new(Vec::new(), "relative/dir");
        assert_eq!(f.handle_key(&key(KeyCode::Enter), &km), Outcome::Continue);
        assert!(
            f.field_error(Field::Profile)
                .unwrap()
                .contains("proctor profile add")
        );
        assert!(
            f.field_error(Field::Workspace)
                .unwrap()
                .contains("absolute")
        );
        assert_eq!(f.focus(), Field::Profile);
        let mut f = NewSessionForm::new(profiles(), "").with_workspace_validator(Box::new(|w| {
            if w == "/missing" {
                Err("no such folder".to_owned())
            } else {
                Ok(())
            }
        }));
        f.handle_key(&key(KeyCode::Enter), &km);
        assert_eq!(f.focus(), Field::Workspace);
        assert!(
            f.field_error(Field::Workspace)
                .unwrap()
                .contains("required")
        );
        type_str(&mut f, &km, "/missing");
        assert_eq!(
            f.field_error(Field::Workspace),
            None,
            "an edit clears the error"
        );
        f.handle_key(&key(KeyCode::Enter), &km);
        assert_eq!(f.field_error(Field::Workspace), Some("no such folder"));
        let theme = Theme::default_theme();
        let t = draw(80, 24, |fr| f.render(fr, fr.area(), &theme, &km));
        let buf = t.backend().buffer();
        let (x, y) = find(buf, "no such folder").unwrap();
        assert_eq!(buf[(x, y)].fg, Color::Red);
        let (_, wy) = find(buf, "/missing").unwrap();
        assert_eq!(y, wy + 1, "the error is right under the field");
        insta::assert_snapshot!("new_session_errors_80x24", t.backend());
    }

    #[test]
    fn server_refusals_show() {
        let km = Keymap::defaults();
        let theme = Theme::default_theme();
        let mut f = NewSessionForm::new(profiles(), "/srv/work").with_profile("codex");
        f.set_error(
            None,
            "422: tool codex is not installed (\x1b[1mcodex\x1b[0m not on PATH)",
        );
        let t = draw(80, 24, |fr| f.render(fr, fr.area(), &theme, &km));
        assert_no_controls(t.backend().buffer());
        assert!(
            find(
                t.backend().buffer(),
                "422: tool codex is not installed (codex not on PATH)"
            )
            .is_some()
        );
        insta::assert_snapshot!("new_session_refused_80x24", t.backend());
    }

    #[test]
    fn snapshots_and_colours() {
        let km = Keymap::defaults();
        let theme = Theme::default_theme();
        for (w, h) in SIZES {
            let f = NewSessionForm::new(profiles(), "/home/op/src/proctor");
            let t = draw(w, h, |fr| f.render(fr, fr.area(), &theme, &km));
            insta::assert_snapshot!(format!("new_session_{w}x{h}"), t.backend());
            let buf = t.backend().buffer();
            let (x, y) = find(buf, "▸ Profile").unwrap();
            assert!(buf[(x + 2, y)].modifier.contains(Modifier::BOLD));
            let (x, y) = find(buf, "claude").unwrap();
            assert!(
                buf[(x, y)].modifier.contains(Modifier::REVERSED),
                "focused choice"
            );
            let (x, y) = find(buf, "/home/op").unwrap();
            assert!(buf[(x, y)].modifier.contains(Modifier::UNDERLINED));
        }
    }

    #[test]
    fn hostile_profile_names_and_paths_render_harmlessly() {
        let km = Keymap::defaults();
        let theme = Theme::default_theme();
        let mut f = NewSessionForm::new(
            vec!["evil\x1b]8;;http://x\x07link\u{202e}".to_owned()],
            "/tmp/\u{202e}txt.exe",
        );
        f.handle_key(&key(KeyCode::Tab), &km);
        f.handle_key(&key(KeyCode::Tab), &km);
        f.handle_key(&key(KeyCode::Tab), &km);
        f.handle_paste("\x1b[2Jrm -rf /\u{2067}");
        let t = draw(80, 24, |fr| f.render(fr, fr.area(), &theme, &km));
        assert_no_controls(t.backend().buffer());
        insta::assert_snapshot!("new_session_hostile_80x24", t.backend());
    }
}
