//! The operator's terminal: taken over (raw mode, alternate screen, bracketed paste, mouse
//! only when configured) and given back on every way out — a normal return, an error (the
//! guard's drop), a panic (a hook that restores before the panic message is printed), and
//! SIGTERM/SIGHUP (the event loop turns them into a normal return).

use std::io::Write;
use std::sync::Once;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use ratatui::crossterm::{cursor, event, execute, terminal};

/// Set while the cockpit holds the terminal.
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// Whether mouse capture was turned on (bit 0).
static MOUSE: AtomicU8 = AtomicU8::new(0);
static HOOK: Once = Once::new();

/// Holds the terminal; restores it when dropped.
pub struct TerminalGuard {
    _private: (),
}

impl TerminalGuard {
    /// Takes the terminal over. `mouse` turns mouse capture on (off by default, so that the
    /// terminal's own selection keeps working for copying text).
    pub fn enter(mouse: bool) -> std::io::Result<TerminalGuard> {
        install_panic_hook();
        terminal::enable_raw_mode()?;
        ACTIVE.store(true, Ordering::SeqCst);
        let guard = TerminalGuard { _private: () };
        let mut out = std::io::stdout();
        execute!(
            out,
            terminal::EnterAlternateScreen,
            event::EnableBracketedPaste,
            cursor::Hide,
            terminal::Clear(terminal::ClearType::All)
        )?;
        if mouse {
            MOUSE.store(1, Ordering::SeqCst);
            execute!(out, event::EnableMouseCapture)?;
        }
        Ok(guard)
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}

/// Gives the terminal back, once; safe to call from a panic hook. Errors are ignored (the
/// terminal may be gone: a hang-up).
pub fn restore() {
    if !ACTIVE.swap(false, Ordering::SeqCst) {
        return;
    }
    let mut out = std::io::stdout();
    if MOUSE.swap(0, Ordering::SeqCst) == 1 {
        let _ = execute!(out, event::DisableMouseCapture);
    }
    let _ = execute!(
        out,
        terminal::EndSynchronizedUpdate,
        event::DisableBracketedPaste,
        terminal::LeaveAlternateScreen,
        cursor::Show
    );
    let _ = terminal::disable_raw_mode();
    let _ = out.flush();
}

fn install_panic_hook() {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
    });
}

/// True when both stdin and stdout are terminals.
pub fn is_terminal() -> bool {
    use std::io::IsTerminal;
    std::io::stdin().is_terminal() && std::io::stdout().is_terminal()
}
