//! The open dialog, drawn over the cockpit by its widget (`crate::tui::widgets`).

use ratatui::Frame;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Paragraph;

use crate::tui::app::{App, Modal, Mode, palette_matches};
use crate::tui::keymap::Context;
use crate::tui::role::Role;
use crate::tui::widgets::{centered, frame_dialog};

/// Draws the open dialog.
pub fn draw(app: &App, frame: &mut Frame<'_>) {
    let Mode::Modal(m) = &app.mode else {
        return;
    };
    let screen = frame.area();
    match &**m {
        Modal::Help(h) => h.render(frame, screen, &app.theme, &app.keymap),
        Modal::Prompt { dialog, .. } => dialog.render(frame, screen, &app.theme, &app.keymap),
        Modal::Confirm { dialog, .. } => dialog.render(frame, screen, &app.theme, &app.keymap),
        Modal::Palette { input, selected } => palette(app, frame, screen, input, *selected),
    }
}

fn palette(
    app: &App,
    frame: &mut Frame<'_>,
    screen: Rect,
    input: &crate::tui::widgets::input::TextInput,
    selected: usize,
) {
    let rect = centered(screen, 76, 20);
    let inner = frame_dialog(frame, rect, "Actions", &app.theme);
    if inner.height < 2 || inner.width < 4 {
        return;
    }
    frame.render_widget(
        Paragraph::new(Span::styled(": ", app.theme.style(Role::Key))),
        Rect::new(inner.x, inner.y, 2, 1),
    );
    input.render(
        frame,
        Rect::new(inner.x + 2, inner.y, inner.width - 2, 1),
        app.theme.style(Role::Input),
        true,
    );
    let contexts = [Context::Sessions, Context::Global];
    let matches = palette_matches(input.value());
    let rows = usize::from(inner.height - 1);
    let sel = selected.min(matches.len().saturating_sub(1));
    let start = sel.saturating_sub(rows.saturating_sub(1));
    for (k, a) in matches.iter().enumerate().skip(start).take(rows) {
        let y = inner.y + 1 + (k - start) as u16;
        let ok = app.can(*a);
        let key = app.keymap.key_for(&contexts, *a).unwrap_or_default();
        let mut st = app
            .theme
            .style(if ok { Role::Text } else { Role::Unavailable });
        if k == sel {
            st = st.patch(app.theme.style(Role::Selected));
        }
        let line = format!(
            " {:<16} {:<10} {}{}",
            a.name(),
            key,
            a.describe(),
            if ok { "" } else { " (unavailable)" }
        );
        frame.render_widget(
            Paragraph::new(Line::from(Span::styled(line, st))),
            Rect::new(inner.x, y, inner.width, 1),
        );
    }
}
