//! The open dialog, drawn over the cockpit by its widget (`crate::tui::widgets`).

use ratatui::Frame;

use crate::tui::app::{App, Mode};

/// Draws the open dialog.
pub fn draw(app: &App, frame: &mut Frame<'_>) {
    let Mode::Modal(m) = &app.mode else {
        return;
    };
    let screen = frame.area();
    let (theme, keymap) = (&app.theme, &app.keymap);
    m.render(frame, screen, theme, keymap);
}
