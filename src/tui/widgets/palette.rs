//! The command palette: every action by name, filtered as the operator types. Actions the
//! token cannot perform (or that the cockpit marks unavailable, e.g. with no session
//! selected) are listed with the reason and cannot be chosen.
//!
//! Matching ranks, best first: the name starts with the query; the name contains it; the
//! query's characters appear in the name in order (`nss` finds `new-session`); the
//! description contains it. Spaces in the query match the hyphens of names.

use ratatui::Frame;
use ratatui::crossterm::event::KeyEvent;
use ratatui::layout::{Margin, Rect};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Paragraph};

use super::input::{Edit, TextInput};
use super::{Dialog, Outcome, centered, frame_dialog, hint_line, is_press, row_style};
use crate::tui::action::{Action, Needs};
use crate::tui::keymap::{Context, Keymap};
use crate::tui::role::Role;
use crate::tui::theme::Theme;

const CONTEXTS: &[Context] = &[Context::Palette, Context::Modal];
/// The narrowest the name column gets (names are cut below their length only then).
const MIN_NAME_WIDTH: usize = 8;
const KEY_WIDTH: usize = 10;

#[derive(Debug, Clone)]
struct Entry {
    action: Action,
    key: Option<String>,
    unavailable: Option<String>,
}

#[derive(Debug, Clone)]
struct Match {
    entry: usize,
    /// Character indices of the name that matched.
    positions: Vec<usize>,
}

/// The command palette.
#[derive(Debug, Clone)]
pub struct Palette {
    input: TextInput,
    entries: Vec<Entry>,
    matches: Vec<Match>,
    /// Index into `matches`; always an available entry.
    selected: Option<usize>,
    /// The first match shown.
    scroll: usize,
}

/// Why a token with `granted` cannot perform `action`, if it cannot.
pub fn token_refusal(action: Action, granted: Needs) -> Option<String> {
    if action.needs() <= granted {
        return None;
    }
    Some(match action.needs() {
        Needs::Admin => "needs an admin token".to_owned(),
        _ => "needs a write token".to_owned(),
    })
}

impl Palette {
    /// Every action, with the key that runs it in `contexts` (the cockpit's contexts under
    /// the palette) and, for a token with only `granted`, the actions it cannot perform.
    pub fn new(keymap: &Keymap, contexts: &[Context], granted: Needs) -> Palette {
        let entries = Action::ALL
            .iter()
            .map(|&action| Entry {
                action,
                key: keymap.key_for(contexts, action),
                unavailable: token_refusal(action, granted),
            })
            .collect();
        let mut p = Palette {
            input: TextInput::default(),
            entries,
            matches: Vec::new(),
            selected: None,
            scroll: 0,
        };
        p.refilter();
        p
    }

    /// Marks `action` unavailable with `reason` (e.g. "no session selected"); a token's
    /// refusal, if any, stays first.
    pub fn set_unavailable(&mut self, action: Action, reason: impl Into<String>) {
        if let Some(e) = self.entries.iter_mut().find(|e| e.action == action)
            && e.unavailable.is_none()
        {
            e.unavailable = Some(reason.into());
        }
        self.refilter();
    }

    /// Why `action` cannot be chosen, if it cannot.
    pub fn unavailable(&self, action: Action) -> Option<&str> {
        self.entries
            .iter()
            .find(|e| e.action == action)
            .and_then(|e| e.unavailable.as_deref())
    }

    pub fn query(&self) -> &str {
        self.input.value()
    }

    /// The action Enter would run.
    pub fn selected(&self) -> Option<Action> {
        self.selected
            .map(|i| self.entries[self.matches[i].entry].action)
    }

    /// The actions listed, in order, each with whether it can be chosen.
    pub fn listed(&self) -> Vec<(Action, bool)> {
        self.matches
            .iter()
            .map(|m| {
                let e = &self.entries[m.entry];
                (e.action, e.unavailable.is_none())
            })
            .collect()
    }

    fn refilter(&mut self) {
        let query = self.input.value().trim().to_lowercase();
        let mut scored: Vec<(u8, Match)> = self
            .entries
            .iter()
            .enumerate()
            .filter_map(|(i, e)| {
                rank(&query, e.action.name(), e.action.describe()).map(|(score, positions)| {
                    (
                        score,
                        Match {
                            entry: i,
                            positions,
                        },
                    )
                })
            })
            .collect();
        // Stable: equal scores keep the order of Action::ALL.
        scored.sort_by_key(|(score, _)| std::cmp::Reverse(*score));
        self.matches = scored.into_iter().map(|(_, m)| m).collect();
        self.selected = self.next_available(0, true);
        self.scroll = 0;
    }

    fn available(&self, i: usize) -> bool {
        self.entries[self.matches[i].entry].unavailable.is_none()
    }

    /// The first available match at or after `from` (forward) or at or before it.
    fn next_available(&self, from: usize, forward: bool) -> Option<usize> {
        if self.matches.is_empty() {
            return None;
        }
        let from = from.min(self.matches.len() - 1);
        if forward {
            (from..self.matches.len()).find(|&i| self.available(i))
        } else {
            (0..=from).rev().find(|&i| self.available(i))
        }
    }

    /// Where the dialog is on `screen`.
    fn place(&self, screen: Rect) -> Rect {
        let width = screen.width.saturating_sub(4).clamp(30, 96);
        let height =
            (self.matches.len() as u16 + 6).clamp(8, screen.height.saturating_sub(2).max(8));
        centered(screen, width, height)
    }

    /// The list's first row when it shows `rows` rows: the last one kept, moved as little
    /// as puts the selection in view.
    fn scroll_for(&self, rows: usize) -> usize {
        let mut scroll = self.scroll;
        if let Some(sel) = self.selected {
            if sel < scroll {
                scroll = sel;
            } else if sel >= scroll + rows {
                scroll = sel + 1 - rows;
            }
        }
        scroll.min(self.matches.len().saturating_sub(rows))
    }

    fn step(&mut self, by: isize) {
        let Some(cur) = self.selected else { return };
        let target = cur
            .saturating_add_signed(by)
            .min(self.matches.len().saturating_sub(1));
        let found = if by > 0 {
            self.next_available(target, true)
                .or_else(|| self.next_available(target, false))
        } else {
            self.next_available(target, false)
                .or_else(|| self.next_available(target, true))
        };
        if let Some(i) = found {
            self.selected = Some(i);
        }
    }
}

impl Dialog for Palette {
    type Output = Action;

    fn handle_paste(&mut self, text: &str) {
        if self.input.insert_str(text) {
            self.refilter();
        }
    }

    fn handle_key(&mut self, key: &KeyEvent, keymap: &Keymap) -> Outcome<Action> {
        if !is_press(key) {
            return Outcome::Continue;
        }
        match self.input.handle_key(key) {
            Edit::Changed => {
                self.refilter();
                return Outcome::Continue;
            }
            Edit::Moved => return Outcome::Continue,
            Edit::Ignored => {}
        }
        match keymap.resolve(CONTEXTS, key) {
            Some(Action::Confirm) => match self.selected() {
                Some(a) => Outcome::Submit(a),
                None => Outcome::Continue,
            },
            Some(Action::Escape) => Outcome::Cancel,
            Some(Action::Up | Action::FocusPrev) => {
                self.step(-1);
                Outcome::Continue
            }
            Some(Action::Down | Action::FocusNext) => {
                self.step(1);
                Outcome::Continue
            }
            Some(Action::PageUp) => {
                self.step(-10);
                Outcome::Continue
            }
            Some(Action::PageDown) => {
                self.step(10);
                Outcome::Continue
            }
            _ => Outcome::Continue,
        }
    }

    /// The list's first row in view keeps the selection in view at this size.
    fn lay_out(&mut self, screen: Rect) {
        // The inside of the frame `frame_dialog` draws, less its margin.
        let inner = Block::default()
            .borders(Borders::ALL)
            .inner(self.place(screen))
            .inner(Margin::new(1, 0));
        if inner.height < 4 {
            return;
        }
        self.scroll = self.scroll_for(usize::from(inner.height - 3));
    }

    fn render(&self, frame: &mut Frame, screen: Rect, theme: &Theme, keymap: &Keymap) {
        let rect = self.place(screen);
        let inner = frame_dialog(frame, rect, "Run an action", theme).inner(Margin::new(1, 0));
        if inner.height < 4 {
            return;
        }
        // The filter.
        frame.render_widget(
            Paragraph::new(Span::styled("› ", theme.style(Role::Key))),
            Rect::new(inner.x, inner.y, 2, 1),
        );
        self.input.render(
            frame,
            Rect::new(inner.x + 2, inner.y, inner.width.saturating_sub(2), 1),
            theme.style(Role::Input),
            true,
        );
        let available = self
            .matches
            .iter()
            .filter(|m| self.entries[m.entry].unavailable.is_none())
            .count();
        let count = if self.matches.is_empty() {
            "no action matches".to_owned()
        } else {
            format!(
                "{} of {} actions, {} available",
                self.matches.len(),
                self.entries.len(),
                available
            )
        };
        frame.render_widget(
            Paragraph::new(Span::styled(count, theme.style(Role::Dim))),
            Rect::new(inner.x, inner.y + 1, inner.width, 1),
        );
        // The list.
        let list = Rect::new(inner.x, inner.y + 2, inner.width, inner.height - 3);
        let rows = usize::from(list.height);
        let scroll = self.scroll_for(rows);
        // The name column fits the longest name (a narrow dialog cuts names, never lets
        // them run into the key column).
        let longest = self
            .entries
            .iter()
            .map(|e| e.action.name().chars().count())
            .max()
            .unwrap_or(0);
        let name_width = longest
            .max(MIN_NAME_WIDTH)
            .min((usize::from(list.width).saturating_sub(KEY_WIDTH + 4) / 2).max(MIN_NAME_WIDTH));
        let desc_width = usize::from(list.width).saturating_sub(name_width + KEY_WIDTH + 4);
        let lines: Vec<Line> = self
            .matches
            .iter()
            .enumerate()
            .skip(scroll)
            .take(rows)
            .map(|(i, m)| {
                let e = &self.entries[m.entry];
                let selected = self.selected == Some(i);
                let base = if e.unavailable.is_some() {
                    Role::Unavailable
                } else {
                    Role::Text
                };
                let style = row_style(theme, base, selected);
                let mut spans = vec![Span::styled(if selected { "▸ " } else { "  " }, style)];
                let name = e.action.name();
                let cut = name.chars().count() > name_width;
                let kept = if cut { name_width - 1 } else { name_width };
                for (ci, c) in name.chars().take(kept).enumerate() {
                    let s = if m.positions.contains(&ci) && e.unavailable.is_none() {
                        style.patch(theme.style(Role::Highlight))
                    } else {
                        style
                    };
                    spans.push(Span::styled(c.to_string(), s));
                }
                if cut {
                    spans.push(Span::styled("…", style));
                }
                let pad = name_width.saturating_sub(name.chars().count().min(name_width)) + 1;
                spans.push(Span::styled(" ".repeat(pad), style));
                let key = crate::text::one_line(e.key.as_deref().unwrap_or(""), KEY_WIDTH);
                let key_pad = KEY_WIDTH
                    .saturating_sub(unicode_width::UnicodeWidthStr::width(key.as_str()))
                    + 1;
                let key_style = if e.unavailable.is_some() {
                    style
                } else {
                    style.patch(theme.style(Role::Key))
                };
                spans.push(Span::styled(key, key_style));
                spans.push(Span::styled(" ".repeat(key_pad), style));
                let text = match &e.unavailable {
                    Some(reason) => format!("unavailable: {reason}"),
                    None => e.action.describe().to_owned(),
                };
                spans.push(Span::styled(
                    crate::text::one_line(&text, desc_width),
                    style,
                ));
                let mut line = Line::from(spans);
                if selected {
                    line = line.style(style);
                }
                line
            })
            .collect();
        frame.render_widget(Paragraph::new(lines), list);
        let hints = hint_line(
            &[
                (
                    keymap
                        .key_for(CONTEXTS, Action::Confirm)
                        .unwrap_or_default(),
                    "run",
                ),
                ("up/down".to_owned(), "choose"),
                (
                    keymap.key_for(CONTEXTS, Action::Escape).unwrap_or_default(),
                    "close",
                ),
            ],
            theme,
        );
        frame.render_widget(
            Paragraph::new(hints),
            Rect::new(inner.x, inner.y + inner.height - 1, inner.width, 1),
        );
    }

    fn contexts(&self) -> &'static [Context] {
        CONTEXTS
    }
}

/// How well `query` (lower case, trimmed) matches an action, with the name's matched
/// character positions; `None` when it does not match.
fn rank(query: &str, name: &str, description: &str) -> Option<(u8, Vec<usize>)> {
    if query.is_empty() {
        return Some((0, Vec::new()));
    }
    let dashed: String = query
        .chars()
        .map(|c| if c == ' ' { '-' } else { c })
        .collect();
    let n = dashed.chars().count();
    if name.starts_with(&dashed) {
        return Some((4, (0..n).collect()));
    }
    if let Some(byte) = name.find(&dashed) {
        let start = name[..byte].chars().count();
        return Some((3, (start..start + n).collect()));
    }
    let mut positions = Vec::new();
    let mut chars = name.chars().enumerate();
    let subsequence = dashed.chars().filter(|c| *c != '-').all(|q| {
        chars
            .by_ref()
            .find(|(_, c)| *c == q)
            .map(|(i, _)| positions.push(i))
            .is_some()
    });
    if subsequence {
        return Some((2, positions));
    }
    if description.to_lowercase().contains(query) {
        return Some((1, Vec::new()));
    }
    None
}

#[cfg(test)]
mod tests {
    use crate::tui::views::Pane;
    use ratatui::crossterm::event::KeyCode;
    use ratatui::style::{Color, Modifier};

    use super::super::testing::{SIZES, assert_no_controls, ch, draw, find, key, row};
    use super::*;

    const UNDER: &[Context] = &[Context::Pane(Pane::Sessions), Context::Global];

    fn typed(p: &mut Palette, km: &Keymap, s: &str) {
        for c in s.chars() {
            assert_eq!(p.handle_key(&ch(c), km), Outcome::Continue);
        }
    }

    #[test]
    fn long_names_keep_out_of_the_key_column() {
        let km = Keymap::defaults();
        let theme = Theme::default_theme();
        for (w, h) in SIZES {
            let mut p = Palette::new(&km, UNDER, Needs::Admin);
            typed(&mut p, &km, "p");
            let t = draw(w, h, |f| p.render(f, f.area(), &theme, &km));
            let buf = t.backend().buffer();
            // Every key starts in one column, after the longest name and a space.
            // The column (in cells) where the key of the row listing `name` starts.
            let key_x = |name: &str, key: &str| {
                for y in 0..buf.area.height {
                    let r: Vec<char> = row(buf, y).chars().collect();
                    let text: String = r.iter().collect();
                    for marker in ["▸ ", "  "] {
                        let needle: Vec<char> = format!("{marker}{name} ").chars().collect();
                        if let Some(at) = r.windows(needle.len()).position(|w| w == needle) {
                            let after = at + needle.len();
                            let k = r[after..].iter().position(|c| *c != ' ').unwrap();
                            let found: String = r[after + k..].iter().take(key.len()).collect();
                            assert_eq!(found, key, "{text}");
                            return after + k;
                        }
                    }
                }
                panic!("{name} is not listed");
            };
            let long = key_x("approve-publication", "P");
            assert_eq!(key_x("palette", ":"), long, "{w}x{h}");
            assert_eq!(key_x("pin", "p"), long, "{w}x{h}");
        }
    }

    #[test]
    fn filtering_ranks_names_then_descriptions() {
        let km = Keymap::defaults();
        let mut p = Palette::new(&km, UNDER, Needs::Admin);
        assert_eq!(p.listed().len(), Action::ALL.len());
        assert_eq!(p.selected(), Some(Action::Quit));
        typed(&mut p, &km, "re");
        let names: Vec<_> = p.listed().iter().map(|(a, _)| a.name()).collect();
        // Prefix matches first (resume, rename, refresh in ALL order), then contains.
        assert_eq!(&names[..3], ["resume", "rename", "refresh"]);
        assert!(names.contains(&"toggle-archived") || names.contains(&"scroll-bottom"));
        let mut p = Palette::new(&km, UNDER, Needs::Admin);
        typed(&mut p, &km, "new sess");
        assert_eq!(p.selected(), Some(Action::NewSession));
        let mut p = Palette::new(&km, UNDER, Needs::Admin);
        typed(&mut p, &km, "nss");
        assert_eq!(p.selected(), Some(Action::NewSession));
        let mut p = Palette::new(&km, UNDER, Needs::Admin);
        typed(&mut p, &km, "kill");
        // Only the description of stop mentions KILL.
        assert_eq!(p.listed(), vec![(Action::Stop, true)]);
        let mut p = Palette::new(&km, UNDER, Needs::Admin);
        typed(&mut p, &km, "zzz");
        assert!(p.listed().is_empty());
        assert_eq!(p.selected(), None);
        assert_eq!(p.handle_key(&key(KeyCode::Enter), &km), Outcome::Continue);
        // Backspace widens again; q is text, not close.
        for _ in 0..3 {
            p.handle_key(&key(KeyCode::Backspace), &km);
        }
        typed(&mut p, &km, "q");
        assert_eq!(p.selected(), Some(Action::Quit));
        assert_eq!(
            p.handle_key(&key(KeyCode::Enter), &km),
            Outcome::Submit(Action::Quit)
        );
        assert_eq!(p.handle_key(&key(KeyCode::Esc), &km), Outcome::Cancel);
    }

    #[test]
    fn a_read_only_token_sees_write_actions_as_unavailable() {
        let km = Keymap::defaults();
        let mut p = Palette::new(&km, UNDER, Needs::Read);
        typed(&mut p, &km, "st");
        // stop (write) is listed first but cannot be chosen.
        let listed = p.listed();
        assert_eq!(listed[0], (Action::Stop, false));
        assert_ne!(p.selected(), Some(Action::Stop));
        assert!(p.selected().is_some());
        // Moving never lands on an unavailable action.
        for _ in 0..40 {
            p.handle_key(&key(KeyCode::Down), &km);
            assert!(p.selected().is_some_and(|a| a.needs() == Needs::Read));
        }
        for _ in 0..40 {
            p.handle_key(&key(KeyCode::Up), &km);
            assert!(p.selected().is_some_and(|a| a.needs() == Needs::Read));
        }
        let mut p = Palette::new(&km, UNDER, Needs::Read);
        typed(&mut p, &km, "stop");
        // stop by name, scroll-top by its letters, cleanup by its description.
        assert_eq!(
            p.listed(),
            vec![
                (Action::Stop, false),
                (Action::ScrollTop, true),
                (Action::Cleanup, false)
            ]
        );
        assert_eq!(p.selected(), Some(Action::ScrollTop));
        let mut p = Palette::new(&km, UNDER, Needs::Read);
        typed(&mut p, &km, "stop the session");
        assert_eq!(p.listed(), vec![(Action::Stop, false)]);
        assert_eq!(p.selected(), None);
        assert_eq!(p.handle_key(&key(KeyCode::Enter), &km), Outcome::Continue);
        // A write token cannot clean up.
        let p = Palette::new(&km, UNDER, Needs::Write);
        assert!(p.listed().contains(&(Action::Cleanup, false)));
        assert!(p.listed().contains(&(Action::Stop, true)));
        assert_eq!(
            token_refusal(Action::Delete, Needs::Write).as_deref(),
            Some("needs an admin token")
        );
    }

    #[test]
    fn the_cockpit_can_mark_actions_unavailable() {
        let km = Keymap::defaults();
        let mut p = Palette::new(&km, UNDER, Needs::Admin);
        p.set_unavailable(Action::Quit, "not now");
        assert_eq!(p.selected(), Some(Action::Help));
        assert!(p.listed().contains(&(Action::Quit, false)));
    }

    #[test]
    fn snapshots_and_colours() {
        let km = Keymap::defaults();
        let theme = Theme::default_theme();
        for (w, h) in SIZES {
            let mut p = Palette::new(&km, UNDER, Needs::Read);
            typed(&mut p, &km, "s");
            let t = draw(w, h, |f| p.render(f, f.area(), &theme, &km));
            insta::assert_snapshot!(format!("palette_{w}x{h}"), t.backend());
            let buf = t.backend().buffer();
            // Unavailable rows are dim grey with the reason.
            let (x, y) = find(buf, "stop").unwrap();
            assert_eq!(buf[(x, y)].fg, Color::DarkGray);
            assert!(row(buf, y).contains("unavailable: needs a write token"));
            // The selected row is reversed; matched characters are highlighted.
            let sel = p.selected().unwrap().name();
            let (x, y) = find(buf, &format!("▸ {sel}")).unwrap();
            assert!(buf[(x, y)].modifier.contains(Modifier::REVERSED));
            let first_s = sel.find('s').unwrap() as u16;
            assert_eq!(buf[(x + 2 + first_s, y)].fg, Color::Yellow);
            assert!(
                buf[(x + 2 + first_s, y)]
                    .modifier
                    .contains(Modifier::BOLD | Modifier::REVERSED)
            );
        }
        let p = Palette::new(&km, UNDER, Needs::Admin);
        let t = draw(80, 24, |f| p.render(f, f.area(), &theme, &km));
        insta::assert_snapshot!("palette_all_80x24", t.backend());
    }

    #[test]
    fn every_theme_colours_the_cells_by_role() {
        let km = Keymap::defaults();
        let mut themes: Vec<Theme> = crate::tui::theme::BUILTIN
            .iter()
            .map(|(name, _)| Theme::builtin(name).unwrap())
            .collect();
        themes.push(Theme::builtin("nord").unwrap().no_color());
        for theme in themes {
            let mut p = Palette::new(&km, UNDER, Needs::Read);
            typed(&mut p, &km, "s");
            let t = draw(80, 24, |f| p.render(f, f.area(), &theme, &km));
            let buf = t.backend().buffer();
            let name = theme.name().to_owned();
            let unavailable = theme.style(Role::Unavailable);
            let (x, y) = find(buf, "  stop").unwrap();
            assert_eq!(
                buf[(x + 2, y)].fg,
                unavailable.fg.unwrap_or(Color::Reset),
                "{name}"
            );
            let selected = theme.style(Role::Selected);
            let (x, y) = find(buf, "▸ snooze").unwrap();
            assert!(buf[(x, y)].modifier.contains(Modifier::REVERSED), "{name}");
            if let Some(fg) = selected.fg {
                assert_eq!(buf[(x, y)].fg, fg, "{name}");
            }
            let (x, y) = find(buf, "╭").unwrap();
            assert_eq!(
                buf[(x, y)].fg,
                theme.style(Role::Modal).fg.unwrap_or(Color::Reset),
                "{name}"
            );
            if !theme.has_colors() {
                for y in 0..buf.area.height {
                    for x in 0..buf.area.width {
                        assert_eq!(
                            (buf[(x, y)].fg, buf[(x, y)].bg),
                            (Color::Reset, Color::Reset)
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn hostile_filter_renders_harmlessly() {
        let km = Keymap::defaults();
        let theme = Theme::default_theme();
        for (w, h) in SIZES {
            let mut p = Palette::new(&km, UNDER, Needs::Admin);
            p.handle_paste("\x1b]0;owned\x07\x1b[2J\u{202e}po\u{2066}ts");
            let t = draw(w, h, |f| p.render(f, f.area(), &theme, &km));
            let buf = t.backend().buffer();
            assert_no_controls(buf);
            assert!(find(buf, "⟨U+202E⟩po⟨U+2066⟩ts").is_some());
            insta::assert_snapshot!(format!("palette_hostile_{w}x{h}"), t.backend());
        }
    }
}
