//! The help screen: the keys in effect, generated from the keymap for the current contexts
//! (most specific first), with the attach prefix always listed. Scrollable.

use ratatui::Frame;
use ratatui::crossterm::event::KeyEvent;
use ratatui::layout::{Margin, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use unicode_width::UnicodeWidthStr;

use super::{Dialog, Outcome, centered, frame_dialog, hint_line, is_press};
use crate::tui::action::Action;
use crate::tui::keymap::{Binding, Context, Keymap};
use crate::tui::role::Role;
use crate::tui::theme::Theme;

const CONTEXTS: &[Context] = &[Context::Modal];
/// The widest key column.
const MAX_KEYS_WIDTH: usize = 24;

#[derive(Debug, Clone)]
enum Row {
    Heading(&'static str),
    Binding {
        keys: String,
        description: String,
        /// The role the action needs when this token lacks it.
        unavailable: Option<&'static str>,
    },
    Blank,
}

/// The help dialog.
#[derive(Debug, Clone)]
pub struct Help {
    rows: Vec<Row>,
    keys_width: usize,
    scroll: usize,
    /// Rows visible at the last render (for paging).
    page: usize,
}

impl Help {
    /// The keys of `contexts` (most specific first, as given to [`Keymap::resolve`]); keys
    /// an earlier context takes are not listed again under a later one.
    pub fn new(keymap: &Keymap, contexts: &[Context]) -> Help {
        Help::with_granted(keymap, contexts, crate::tui::action::Needs::Admin, false)
    }

    /// As [`Help::new`], marking the actions that a token with `granted` cannot perform
    /// (shown, with the role they need, and never attempted); an `agent` token cannot
    /// approve a publication whatever its role.
    pub fn with_granted(
        keymap: &Keymap,
        contexts: &[Context],
        granted: crate::tui::action::Needs,
        agent: bool,
    ) -> Help {
        let mut contexts = contexts.to_vec();
        if !contexts.contains(&Context::Attach) {
            contexts.push(Context::Attach);
        }
        let mut rows = Vec::new();
        for (ctx, bindings) in keymap.effective_bindings(&contexts) {
            if !rows.is_empty() {
                rows.push(Row::Blank);
            }
            rows.push(Row::Heading(ctx.title()));
            for Binding {
                keys,
                description,
                action,
                ..
            } in bindings
            {
                let unavailable = (action.needs() > granted)
                    .then(|| match action.needs() {
                        crate::tui::action::Needs::Read => "read",
                        crate::tui::action::Needs::Write => "write",
                        crate::tui::action::Needs::Admin => "admin",
                    })
                    .or((agent && action == crate::tui::action::Action::Approve)
                        .then_some("a person's token, not an agent's"));
                rows.push(Row::Binding {
                    keys,
                    description,
                    unavailable,
                });
            }
        }
        let keys_width = rows
            .iter()
            .filter_map(|r| match r {
                Row::Binding { keys, .. } => {
                    Some(crate::text::one_line(keys, MAX_KEYS_WIDTH).width())
                }
                _ => None,
            })
            .max()
            .unwrap_or(0);
        Help {
            rows,
            keys_width,
            scroll: 0,
            page: 10,
        }
    }

    /// The first row shown.
    pub fn scroll(&self) -> usize {
        self.scroll
    }

    /// Where the dialog is on `screen`, and how many rows a page shows.
    fn place(&self, screen: Rect) -> (Rect, usize) {
        let width = screen.width.saturating_sub(4).clamp(30, 100);
        let height = (self.rows.len() as u16 + 4).min(screen.height.saturating_sub(2));
        let rect = centered(screen, width, height);
        (rect, usize::from(rect.height.saturating_sub(4)).max(1))
    }

    fn max_scroll(&self) -> usize {
        self.rows.len().saturating_sub(self.page.max(1))
    }
}

impl Dialog for Help {
    type Output = ();

    fn handle_key(&mut self, key: &KeyEvent, keymap: &Keymap) -> Outcome<()> {
        if !is_press(key) {
            return Outcome::Continue;
        }
        // The key that opened help closes it.
        if keymap.resolve(&[Context::Global], key) == Some(Action::Help) {
            return Outcome::Cancel;
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

    /// A page is the rows the dialog shows at this size (what pgup and pgdn move by).
    fn lay_out(&mut self, screen: Rect) {
        self.page = self.place(screen).1;
    }

    fn render(&self, frame: &mut Frame, screen: Rect, theme: &Theme, keymap: &Keymap) {
        let (rect, page) = self.place(screen);
        let scroll = self.scroll.min(self.rows.len().saturating_sub(page));
        let last = (scroll + page).min(self.rows.len());
        let title = if self.rows.len() > page {
            format!("Keys ({}–{} of {})", scroll + 1, last, self.rows.len())
        } else {
            "Keys".to_owned()
        };
        let inner = frame_dialog(frame, rect, &title, theme).inner(Margin::new(1, 0));
        if inner.height < 2 {
            return;
        }
        let desc_width = usize::from(inner.width).saturating_sub(self.keys_width + 4);
        let lines: Vec<Line> = self.rows[scroll..last]
            .iter()
            .map(|row| match row {
                Row::Heading(t) => Line::from(Span::styled(*t, theme.style(Role::Title))),
                Row::Blank => Line::default(),
                Row::Binding {
                    keys,
                    description,
                    unavailable,
                } => {
                    let keys = crate::text::one_line(keys, MAX_KEYS_WIDTH);
                    let pad = self.keys_width.saturating_sub(keys.width());
                    let (text, role) = match unavailable {
                        Some(need) => (
                            format!("{description} (unavailable: needs {need})"),
                            Role::Unavailable,
                        ),
                        None => (description.clone(), Role::Text),
                    };
                    Line::from(vec![
                        Span::raw("  "),
                        Span::styled(keys, theme.style(Role::Key)),
                        Span::raw(" ".repeat(pad + 2)),
                        Span::styled(crate::text::one_line(&text, desc_width), theme.style(role)),
                    ])
                }
            })
            .collect();
        frame.render_widget(
            Paragraph::new(lines),
            Rect::new(inner.x, inner.y + 1, inner.width, inner.height - 2),
        );
        let close = keymap.key_for(CONTEXTS, Action::Escape).unwrap_or_default();
        let mut hints = vec![(close, "close")];
        if self.rows.len() > page {
            let up = keymap.key_for(CONTEXTS, Action::PageUp).unwrap_or_default();
            let down = keymap
                .key_for(CONTEXTS, Action::PageDown)
                .unwrap_or_default();
            hints.push((format!("{up}/{down}"), "scroll"));
        }
        frame.render_widget(
            Paragraph::new(hint_line(&hints, theme)),
            Rect::new(inner.x, inner.y + inner.height - 1, inner.width, 1),
        );
    }
}

#[cfg(test)]
mod tests {
    use crate::tui::views::Pane;
    use ratatui::crossterm::event::KeyCode;
    use ratatui::style::{Color, Modifier};

    use super::super::testing::{SIZES, assert_no_controls, ch, draw, find, key};
    use super::*;

    const SESSIONS: &[Context] = &[Context::Pane(Pane::Sessions), Context::Global];

    #[test]
    fn an_agent_token_sees_approval_marked_unavailable_whatever_its_role() {
        let km = Keymap::defaults();
        let contexts = [Context::Pane(Pane::Intents), Context::Global];
        let mark = |agent: bool| {
            let h = Help::with_granted(&km, &contexts, crate::tui::action::Needs::Admin, agent);
            h.rows.iter().find_map(|r| match r {
                Row::Binding {
                    description,
                    unavailable,
                    ..
                } if description == Action::Approve.describe() => Some(*unavailable),
                _ => None,
            })
        };
        assert_eq!(mark(true), Some(Some("a person's token, not an agent's")));
        assert_eq!(mark(false), Some(None));
    }

    #[test]
    fn a_read_token_sees_write_and_admin_actions_marked_unavailable() {
        let km = Keymap::defaults();
        let h = Help::with_granted(&km, SESSIONS, crate::tui::action::Needs::Read, false);
        let need = |d: &str| {
            h.rows.iter().find_map(|r| match r {
                Row::Binding {
                    description,
                    unavailable,
                    ..
                } if description == d => Some(*unavailable),
                _ => None,
            })
        };
        assert_eq!(need(Action::Stop.describe()), Some(Some("write")));
        assert_eq!(need(Action::Delete.describe()), Some(Some("admin")));
        assert_eq!(
            need(Action::Pin.describe()),
            Some(None),
            "pins are the reader's own"
        );
        // Drawn in the Unavailable role, with the role it needs.
        let theme = Theme::builtin("default").unwrap();
        let t = draw(160, 48, |f| h.render(f, f.area(), &theme, &km));
        let buf = t.backend().buffer();
        let (x, y) = find(buf, "(unavailable: needs write)").expect("marked");
        assert_eq!(buf[(x, y)].style().fg, theme.style(Role::Unavailable).fg);
        // An admin token sees no mark.
        let h = Help::new(&km, SESSIONS);
        let t = draw(160, 48, |f| h.render(f, f.area(), &theme, &km));
        assert!(find(t.backend().buffer(), "unavailable").is_none());
    }

    #[test]
    fn lists_the_keys_in_effect() {
        let km = Keymap::defaults();
        let h = Help::new(&km, SESSIONS);
        let headings: Vec<_> = h
            .rows
            .iter()
            .filter_map(|r| match r {
                Row::Heading(t) => Some(*t),
                _ => None,
            })
            .collect();
        assert_eq!(headings, ["Sessions list", "Everywhere", "Attached"]);
        let has = |k: &str, d: &str| {
            h.rows.iter().any(|r| {
                matches!(r, Row::Binding { keys, description, .. } if keys == k && description == d)
            })
        };
        assert!(has("k, up", Action::Up.describe()));
        assert!(has("q, ctrl-c", Action::Quit.describe()));
        assert!(has(
            "ctrl-\\",
            "return to the cockpit (the session keeps running)"
        ));
        // In the live pane k scrolls instead.
        let h = Help::new(&km, &[Context::Pane(Pane::Live), Context::Global]);
        assert!(h.rows.iter().any(
            |r| matches!(r, Row::Binding { keys, description, .. } if keys == "k, up" && description == "scroll back one line")
        ));
    }

    #[test]
    fn user_descriptions_and_keys_show() {
        let km = Keymap::from_str_over_defaults(
            "[global]\n\"x\" = { action = \"stop\", description = \"halt \\u001b[31mnow\" }\n",
            "t",
        )
        .unwrap();
        let theme = Theme::default_theme();
        let h = Help::new(&km, SESSIONS);
        let t = draw(160, 48, |f| h.render(f, f.area(), &theme, &km));
        let buf = t.backend().buffer();
        assert_no_controls(buf);
        // The escape sequence is dropped whole.
        assert!(find(buf, "halt now").is_some());
    }

    #[test]
    fn scrolling_and_closing() {
        let km = Keymap::defaults();
        let theme = Theme::default_theme();
        let mut h = Help::new(&km, SESSIONS);
        // Lay it out at 80x24 to learn the page size.
        h.lay_out(Rect::new(0, 0, 80, 24));
        let page = h.page;
        assert!(h.rows.len() > page);
        assert_eq!(h.handle_key(&key(KeyCode::Down), &km), Outcome::Continue);
        assert_eq!(h.handle_key(&ch('j'), &km), Outcome::Continue);
        assert_eq!(h.scroll(), 2);
        h.handle_key(&key(KeyCode::PageDown), &km);
        assert_eq!(h.scroll(), (2 + page).min(h.rows.len() - page));
        h.handle_key(&key(KeyCode::End), &km);
        assert_eq!(h.scroll(), h.rows.len() - page);
        h.handle_key(&key(KeyCode::Down), &km);
        assert_eq!(h.scroll(), h.rows.len() - page, "no scrolling past the end");
        let t = draw(80, 24, |f| h.render(f, f.area(), &theme, &km));
        insta::assert_snapshot!("help_scrolled_80x24", t.backend());
        h.handle_key(&key(KeyCode::Home), &km);
        assert_eq!(h.scroll(), 0);
        h.handle_key(&key(KeyCode::PageUp), &km);
        assert_eq!(h.scroll(), 0);
        assert_eq!(h.handle_key(&ch('?'), &km), Outcome::Cancel);
        assert_eq!(h.handle_key(&key(KeyCode::Esc), &km), Outcome::Cancel);
        assert_eq!(h.handle_key(&ch('q'), &km), Outcome::Cancel);
    }

    #[test]
    fn snapshots_and_colours() {
        let km = Keymap::defaults();
        let theme = Theme::default_theme();
        for (w, h) in SIZES {
            let help = Help::new(&km, SESSIONS);
            let t = draw(w, h, |f| help.render(f, f.area(), &theme, &km));
            insta::assert_snapshot!(format!("help_{w}x{h}"), t.backend());
            let buf = t.backend().buffer();
            let (x, y) = find(buf, "Sessions list").unwrap();
            assert!(buf[(x, y)].modifier.contains(Modifier::BOLD));
            let (x, y) = find(buf, "k, up").unwrap();
            assert_eq!(buf[(x, y)].fg, Color::Yellow);
            let (x, y) = find(buf, "select the previous item").unwrap();
            assert_eq!(buf[(x, y)].fg, Color::Reset);
        }
    }
}
