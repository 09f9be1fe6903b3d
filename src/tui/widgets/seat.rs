//! A tribunal seat, opened from the Tribunal view: its lens, tier and charter, the rung that
//! sat, the routing table (every rung tried with what happened and why, the verifier's
//! too), the verdict as it was read and counted, and the findings by severity. Everything
//! in it (models, reasons, answers' tails, claims, evidence) is untrusted text and goes
//! through the sanitiser when drawn.

use ratatui::Frame;
use ratatui::crossterm::event::KeyEvent;
use ratatui::layout::Rect;

use super::{Dialog, Outcome, centered, is_press};
use crate::api::tribunal::{Judged, Round, Seat, SeatState, Severity};
use crate::tui::action::Action;
use crate::tui::keymap::{Context, Keymap};
use crate::tui::role::Role;
use crate::tui::theme::Theme;

const CONTEXTS: &[Context] = &[Context::Modal];

/// One line of the dialog before wrapping: its indent, its role, its (unsanitised) text.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Row {
    indent: usize,
    role: Role,
    text: String,
}

/// The seat dialog.
#[derive(Debug, Clone)]
pub struct SeatDialog {
    title: String,
    rows: Vec<Row>,
    scroll: usize,
    /// The rows a page shows at the current size (set by `lay_out`).
    page: usize,
    /// The wrapped rows at the current width (set by `lay_out`).
    wrapped: Vec<(Role, String)>,
}

/// The role of a seat's state.
pub fn state_role(s: SeatState) -> Role {
    match s {
        SeatState::Pass => Role::Success,
        SeatState::Refuse => Role::Error,
        SeatState::Hold | SeatState::Unverified | SeatState::Rejected => Role::Warning,
        SeatState::Pending => Role::Dim,
    }
}

/// The role of a finding's severity.
pub fn severity_role(s: Severity) -> Role {
    match s {
        Severity::Blocker | Severity::Major => Role::Error,
        Severity::Minor => Role::Warning,
        Severity::Info => Role::Dim,
    }
}

impl SeatDialog {
    pub fn new(round: &Round, seat: Seat) -> SeatDialog {
        let mut rows = Vec::new();
        let mut push =
            |indent: usize, role: Role, text: String| rows.push(Row { indent, role, text });
        push(
            0,
            state_role(seat.state),
            format!("state     {}", seat.state.as_str().to_uppercase()),
        );
        if let Some(c) = &seat.cause {
            push(10, Role::Text, c.clone());
        }
        push(0, Role::Text, format!("tier      {}", seat.tier.as_str()));
        push(0, Role::Dim, format!("charter   {}", seat.charter));
        match &seat.sat {
            Some(s) => push(
                0,
                Role::Text,
                format!(
                    "sat on    {} {} ({}{}), {} ladder rung {}",
                    s.backend.as_str(),
                    s.model,
                    s.family,
                    if s.local { ", local" } else { "" },
                    s.ladder,
                    s.rung
                ),
            ),
            None => push(0, Role::Warning, "sat on    no rung sat".into()),
        }
        push(
            0,
            Role::Dim,
            format!(
                "round     {} (#{}) · builder {} ({}) · excluded {}",
                round.id,
                round.number,
                round.builder,
                round.builder_family,
                round.excluded_families.join(", ")
            ),
        );
        push(0, Role::Text, String::new());
        push(
            0,
            Role::Title,
            "Routing (every rung tried, in order)".into(),
        );
        for a in &seat.routing {
            let role = match a.outcome.as_str() {
                "sat" => Role::Success,
                "builder_family" | "same_family_as_primary" => Role::Warning,
                "wrong_lens" | "no_answer" | "dead" | "capacity" => Role::Warning,
                _ => Role::Text,
            };
            push(
                2,
                role,
                format!(
                    "{} {} · {} {} ({}) · {}",
                    a.ladder,
                    a.rung,
                    a.backend.as_str(),
                    a.model,
                    a.family,
                    a.outcome.as_str()
                ),
            );
            push(6, Role::Dim, a.reason.clone());
            if let Some(t) = &a.raw_tail {
                push(6, Role::Dim, format!("said: {t}"));
            }
        }
        if let Some(v) = &seat.verification {
            push(2, Role::Text, format!("verification: {}", v.state));
        }
        push(0, Role::Text, String::new());
        match &seat.judged {
            Some(Judged::Verdict {
                verdict,
                counted,
                notes,
                bare,
            }) => {
                let word = |w: crate::api::tribunal::Word| match w {
                    crate::api::tribunal::Word::Pass => "pass",
                    crate::api::tribunal::Word::Refuse => "refuse",
                };
                push(
                    0,
                    Role::Title,
                    format!(
                        "Verdict {} · counted {}{} · {} finding(s)",
                        word(verdict.verdict),
                        word(*counted),
                        if *bare {
                            " · bare (counts, never alone)"
                        } else {
                            ""
                        },
                        verdict.findings.len()
                    ),
                );
                for n in notes {
                    push(2, Role::Warning, n.clone());
                }
                let mut findings = verdict.findings.clone();
                findings.sort_by_key(|f| f.severity);
                for f in findings {
                    push(
                        2,
                        severity_role(f.severity),
                        format!("[{}] {}", f.severity.as_str(), f.claim),
                    );
                    push(6, Role::Dim, format!("evidence: {}", f.evidence));
                }
            }
            Some(Judged::OffLens { answered, raw_tail }) => {
                push(
                    0,
                    Role::Warning,
                    format!("Answered for lens {answered}: not a verdict"),
                );
                push(2, Role::Dim, raw_tail.clone());
            }
            Some(Judged::Bad { problem, raw_tail }) => {
                push(
                    0,
                    Role::Error,
                    format!("A bad answer (counts as refuse): {problem}"),
                );
                push(2, Role::Dim, raw_tail.clone());
            }
            None => push(0, Role::Dim, "No verdict.".into()),
        }
        SeatDialog {
            title: format!("Seat {} · {}", seat.lens, round.candidate),
            rows,
            scroll: 0,
            page: 10,
            wrapped: Vec::new(),
        }
    }

    /// Every row's text as drawn (sanitised, unwrapped), for tests and search.
    pub fn text(&self) -> Vec<String> {
        self.rows
            .iter()
            .map(|r| crate::text::one_line(&r.text, usize::MAX))
            .collect()
    }

    fn place(&self, screen: Rect) -> Rect {
        let w = screen.width.saturating_sub(4).min(110);
        let h = screen.height.saturating_sub(2);
        centered(screen, w, h)
    }

    fn max_scroll(&self) -> usize {
        self.wrapped.len().saturating_sub(self.page)
    }
}

impl Dialog for SeatDialog {
    type Output = ();

    fn handle_key(&mut self, key: &KeyEvent, keymap: &Keymap) -> Outcome<()> {
        if !is_press(key) {
            return Outcome::Continue;
        }
        let page = self.page.max(1);
        match keymap.resolve(CONTEXTS, key) {
            Some(Action::Escape | Action::Confirm) => return Outcome::Cancel,
            Some(Action::Up) => self.scroll = self.scroll.saturating_sub(1),
            Some(Action::Down) => self.scroll += 1,
            Some(Action::PageUp) => self.scroll = self.scroll.saturating_sub(page),
            Some(Action::PageDown) => self.scroll += page,
            Some(Action::Top) => self.scroll = 0,
            Some(Action::Bottom) => self.scroll = usize::MAX,
            _ => {}
        }
        self.scroll = self.scroll.min(self.max_scroll());
        Outcome::Continue
    }

    fn lay_out(&mut self, screen: Rect) {
        let rect = self.place(screen);
        let inner = Rect::new(
            0,
            0,
            rect.width.saturating_sub(4),
            rect.height.saturating_sub(2),
        );
        let width = usize::from(inner.width).max(10);
        self.wrapped = self
            .rows
            .iter()
            .flat_map(|r| {
                let ind = r.indent.min(width / 2);
                crate::tui::ui::wrap(&r.text, width - ind, 0)
                    .into_iter()
                    .map(move |l| (r.role, format!("{}{l}", " ".repeat(ind))))
            })
            .collect();
        // The hints take the last row.
        self.page = usize::from(inner.height).saturating_sub(1).max(1);
        self.scroll = self.scroll.min(self.max_scroll());
    }

    fn render(&self, frame: &mut Frame, screen: Rect, theme: &Theme, keymap: &Keymap) {
        let view = super::Scrolled {
            title: &self.title,
            rows: &self.wrapped,
            scroll: self.scroll,
            page: self.page,
        };
        view.render(frame, self.place(screen), theme, keymap, CONTEXTS);
    }

    fn contexts(&self) -> &'static [Context] {
        CONTEXTS
    }
}
