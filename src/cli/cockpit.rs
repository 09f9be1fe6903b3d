//! `proctor` with no verb: the cockpit.

use std::process::ExitCode;

use super::{Ctx, UsageError};
use crate::tui;

/// Opens the cockpit on the home; refuses without a terminal (exit 2).
pub fn run(ctx: &Ctx) -> anyhow::Result<ExitCode> {
    if !tui::term::is_terminal() {
        return Err(UsageError::new(tui::TuiError::NotATerminal.to_string()));
    }
    let home = ctx.home()?;
    tui::run(&home, tui::Options::default())?;
    Ok(ExitCode::SUCCESS)
}
