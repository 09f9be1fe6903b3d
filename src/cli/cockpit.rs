//! `proctor` with no verb: the cockpit.

use std::process::ExitCode;

use super::{Ctx, UsageError};
use crate::tui;

/// Opens the cockpit on the home; refuses without a terminal, or with `TERM=dumb` (exit 2).
pub fn run(ctx: &Ctx) -> anyhow::Result<ExitCode> {
    if !tui::term::is_terminal() {
        return Err(UsageError::new(tui::TuiError::NotATerminal.to_string()));
    }
    if tui::term::TermKind::from_env() == tui::term::TermKind::Dumb {
        return Err(UsageError::new(tui::TuiError::DumbTerminal.to_string()));
    }
    let home = ctx.home()?;
    tui::run(
        &home,
        tui::Options {
            hosts: ctx.hosts.clone(),
            ..tui::Options::default()
        },
    )?;
    Ok(ExitCode::SUCCESS)
}
