//! A one-line text field with a cursor, shared by the dialogs.
//!
//! The value holds what the operator typed or pasted, minus control characters (a paste's
//! line ends and tabs become spaces). It is shown through [`crate::text::one_line`], grapheme
//! by grapheme, so an invisible or bidi character typed or pasted in shows as its
//! `⟨U+XXXX⟩` marker and the cursor stays where the operator sees it.

use std::cell::Cell;

use ratatui::Frame;
use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;
use unicode_segmentation::UnicodeSegmentation;
use unicode_width::UnicodeWidthStr;

use super::{is_press, typed_char};

/// The most characters a field holds (a paste beyond it is cut).
pub const MAX_CHARS: usize = 4096;

/// What a key did to a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Edit {
    /// The value changed.
    Changed,
    /// Only the cursor moved.
    Moved,
    /// The key is not an editing key; the dialog may act on it.
    Ignored,
}

/// A one-line text field.
#[derive(Debug, Clone, Default)]
pub struct TextInput {
    value: String,
    /// The cursor, in grapheme clusters from the start.
    cursor: usize,
    /// The first grapheme shown (kept by rendering so the cursor stays visible).
    offset: Cell<usize>,
}

impl TextInput {
    pub fn new(value: &str) -> TextInput {
        let mut input = TextInput::default();
        input.insert_str(value);
        input
    }

    pub fn value(&self) -> &str {
        &self.value
    }

    /// The cursor position in grapheme clusters.
    pub fn cursor(&self) -> usize {
        self.cursor
    }

    pub fn is_empty(&self) -> bool {
        self.value.is_empty()
    }

    /// Replaces the value; the cursor goes to its end.
    pub fn set(&mut self, value: &str) {
        self.value.clear();
        self.cursor = 0;
        self.offset.set(0);
        self.insert_str(value);
    }

    fn graphemes(&self) -> Vec<&str> {
        self.value.graphemes(true).collect()
    }

    fn byte_at(&self, grapheme: usize) -> usize {
        self.value
            .grapheme_indices(true)
            .nth(grapheme)
            .map_or(self.value.len(), |(i, _)| i)
    }

    /// Inserts text at the cursor: control characters dropped, line ends and tabs as spaces,
    /// the value capped at [`MAX_CHARS`].
    pub fn insert_str(&mut self, text: &str) -> bool {
        let room = MAX_CHARS.saturating_sub(self.value.chars().count());
        let clean: String = text
            .chars()
            .filter_map(|c| match c {
                '\n' | '\r' | '\t' => Some(' '),
                c if c.is_control() => None,
                c => Some(c),
            })
            .take(room)
            .collect();
        if clean.is_empty() {
            return false;
        }
        let at = self.byte_at(self.cursor);
        let before = self.value[..at].graphemes(true).count();
        self.value.insert_str(at, &clean);
        // Count clusters up to the end of the insertion (a combining mark may join).
        let end = at + clean.len();
        self.cursor = self.value[..end].graphemes(true).count().max(before);
        true
    }

    /// Applies an editing key.
    pub fn handle_key(&mut self, key: &KeyEvent) -> Edit {
        if !is_press(key) {
            return Edit::Ignored;
        }
        if let Some(c) = typed_char(key) {
            let mut buf = [0u8; 4];
            return if self.insert_str(c.encode_utf8(&mut buf)) {
                Edit::Changed
            } else {
                Edit::Ignored
            };
        }
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let alt = key.modifiers.contains(KeyModifiers::ALT);
        let count = self.graphemes().len();
        match key.code {
            KeyCode::Backspace if ctrl || alt => self.delete_word_before(),
            KeyCode::Char('w') if ctrl => self.delete_word_before(),
            KeyCode::Backspace => {
                if self.cursor == 0 {
                    return Edit::Moved;
                }
                let (a, b) = (self.byte_at(self.cursor - 1), self.byte_at(self.cursor));
                self.value.replace_range(a..b, "");
                self.cursor -= 1;
                Edit::Changed
            }
            KeyCode::Delete => {
                if self.cursor >= count {
                    return Edit::Moved;
                }
                let (a, b) = (self.byte_at(self.cursor), self.byte_at(self.cursor + 1));
                self.value.replace_range(a..b, "");
                Edit::Changed
            }
            KeyCode::Char('u') if ctrl => {
                let at = self.byte_at(self.cursor);
                self.value.replace_range(..at, "");
                self.cursor = 0;
                Edit::Changed
            }
            KeyCode::Char('k') if ctrl => {
                let at = self.byte_at(self.cursor);
                self.value.truncate(at);
                Edit::Changed
            }
            KeyCode::Left if !ctrl && !alt => {
                self.cursor = self.cursor.saturating_sub(1);
                Edit::Moved
            }
            KeyCode::Right if !ctrl && !alt => {
                self.cursor = (self.cursor + 1).min(count);
                Edit::Moved
            }
            KeyCode::Home => {
                self.cursor = 0;
                Edit::Moved
            }
            KeyCode::Char('a') if ctrl => {
                self.cursor = 0;
                Edit::Moved
            }
            KeyCode::End => {
                self.cursor = count;
                Edit::Moved
            }
            KeyCode::Char('e') if ctrl => {
                self.cursor = count;
                Edit::Moved
            }
            _ => Edit::Ignored,
        }
    }

    fn delete_word_before(&mut self) -> Edit {
        let g = self.graphemes();
        let mut start = self.cursor;
        while start > 0 && g[start - 1].trim().is_empty() {
            start -= 1;
        }
        while start > 0 && !g[start - 1].trim().is_empty() {
            start -= 1;
        }
        let (a, b) = (self.byte_at(start), self.byte_at(self.cursor));
        self.value.replace_range(a..b, "");
        self.cursor = start;
        Edit::Changed
    }

    /// Draws the field in `area` (one row) with `style`; with `focused`, places the
    /// terminal cursor.
    pub fn render(&self, frame: &mut Frame, area: Rect, style: Style, focused: bool) {
        if area.width == 0 || area.height == 0 {
            return;
        }
        // Each cluster as it is displayed (sanitised) and its width (at least one column).
        let shown: Vec<(String, usize)> = self
            .graphemes()
            .iter()
            .map(|g| {
                let s = crate::text::one_line(g, usize::MAX);
                let w = s.width().max(1);
                (s, w)
            })
            .collect();
        // One column is kept for the cursor after the last cluster.
        let room = usize::from(area.width).saturating_sub(1).max(1);
        let cursor = self.cursor.min(shown.len());
        let mut offset = self.offset.get().min(cursor);
        while offset < cursor && shown[offset..cursor].iter().map(|s| s.1).sum::<usize>() > room {
            offset += 1;
        }
        self.offset.set(offset);
        let mut used = 0;
        let mut text = String::new();
        for (s, w) in &shown[offset..] {
            if used + w > usize::from(area.width) {
                break;
            }
            used += w;
            text.push_str(s);
        }
        frame.render_widget(ratatui::widgets::Clear, area);
        frame.render_widget(
            Paragraph::new(Line::from(Span::raw(text))).style(style),
            area,
        );
        if focused {
            let col: usize = shown[offset..cursor].iter().map(|s| s.1).sum();
            let x = area.x + u16::try_from(col).unwrap_or(u16::MAX).min(area.width - 1);
            frame.set_cursor_position((x, area.y));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{ch, ctrl, draw, key, row};
    use super::*;

    fn typed(s: &str) -> TextInput {
        let mut i = TextInput::default();
        for c in s.chars() {
            assert_eq!(i.handle_key(&ch(c)), Edit::Changed);
        }
        i
    }

    #[test]
    fn editing_keys() {
        let mut i = typed("hello world");
        assert_eq!(i.value(), "hello world");
        assert_eq!(i.cursor(), 11);
        i.handle_key(&key(KeyCode::Backspace));
        assert_eq!(i.value(), "hello worl");
        i.handle_key(&key(KeyCode::Home));
        i.handle_key(&key(KeyCode::Delete));
        assert_eq!(i.value(), "ello worl");
        i.handle_key(&key(KeyCode::Right));
        i.handle_key(&ch('X'));
        assert_eq!(i.value(), "eXllo worl");
        i.handle_key(&ctrl('e'));
        i.handle_key(&ctrl('w'));
        assert_eq!(i.value(), "eXllo ");
        i.handle_key(&ctrl('a'));
        assert_eq!(i.cursor(), 0);
        i.handle_key(&key(KeyCode::End));
        i.handle_key(&key(KeyCode::Left));
        i.handle_key(&ctrl('k'));
        assert_eq!(i.value(), "eXllo");
        i.handle_key(&ctrl('u'));
        assert_eq!(i.value(), "");
        assert_eq!(i.handle_key(&key(KeyCode::Backspace)), Edit::Moved);
        assert_eq!(i.handle_key(&key(KeyCode::Enter)), Edit::Ignored);
        assert_eq!(i.handle_key(&ctrl('c')), Edit::Ignored);
        assert_eq!(i.handle_key(&key(KeyCode::Esc)), Edit::Ignored);
    }

    #[test]
    fn clusters_are_edited_whole() {
        let mut i = TextInput::new("e\u{301}👍🏽");
        assert_eq!(i.cursor(), 2);
        i.handle_key(&key(KeyCode::Backspace));
        assert_eq!(i.value(), "e\u{301}");
        i.handle_key(&key(KeyCode::Backspace));
        assert_eq!(i.value(), "");
    }

    #[test]
    fn pastes_lose_their_controls() {
        let mut i = TextInput::default();
        i.insert_str("a\x1b[31mb\nc\u{7}\td");
        assert_eq!(i.value(), "a[31mb c d");
        let mut i = TextInput::default();
        i.insert_str(&"x".repeat(MAX_CHARS + 10));
        assert_eq!(i.value().len(), MAX_CHARS);
        assert!(!i.insert_str("y"));
    }

    #[test]
    fn rendering_is_sanitised_and_scrolls_to_the_cursor() {
        let i = TextInput::new("ab\u{202e}cd");
        let t = draw(20, 1, |f| {
            i.render(f, Rect::new(0, 0, 20, 1), Style::default(), true)
        });
        assert_eq!(row(t.backend().buffer(), 0), "ab⟨U+202E⟩cd        ");
        let mut t = t;
        assert_eq!(t.get_cursor_position().unwrap(), (12, 0).into());
        // A long value shows its end with the cursor at the end.
        let long = TextInput::new(&"0123456789".repeat(3));
        let mut t = draw(10, 1, |f| {
            long.render(f, Rect::new(0, 0, 10, 1), Style::default(), true)
        });
        assert_eq!(row(t.backend().buffer(), 0), "123456789 ");
        assert_eq!(t.get_cursor_position().unwrap(), (9, 0).into());
    }
}
