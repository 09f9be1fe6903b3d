//! The open dialog, drawn over the cockpit by its widget (`crate::tui::widgets`).

use ratatui::Frame;

use crate::tui::app::{App, Modal, Mode};

/// Draws the open dialog.
pub fn draw(app: &App, frame: &mut Frame<'_>) {
    let Mode::Modal(m) = &app.mode else {
        return;
    };
    let screen = frame.area();
    let (theme, keymap) = (&app.theme, &app.keymap);
    match &**m {
        Modal::Help(h) => h.render(frame, screen, theme, keymap),
        Modal::Prompt { dialog, .. } => dialog.render(frame, screen, theme, keymap),
        Modal::Confirm { dialog, .. } => dialog.render(frame, screen, theme, keymap),
        Modal::Palette(p) => p.render(frame, screen, theme, keymap),
        Modal::Snooze { picker, .. } => picker.render(frame, screen, theme, keymap),
        Modal::NewSession { form, .. } => form.render(frame, screen, theme, keymap),
        Modal::Approval(a) => a.render(frame, screen, theme),
    }
}
