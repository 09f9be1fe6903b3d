//! The header: where we are (host, home), what runs (counts by state, and `waiting N` while
//! runs wait for the person), `agents unconfined`
//! while any run is live (none is behind a rig), how many publication intents await a
//! person's authority, who we are (role).

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::Line;

use super::span;
use crate::text;
use crate::tui::app::App;
use crate::tui::role::Role;

/// How much of the header to show; each step towards the end of [`FITS`] gives way a little
/// more when the screen is narrow.
#[derive(Clone, Copy)]
struct Fit {
    /// The name, the separators and the long words.
    wide: bool,
    long_auth: bool,
    /// Counts that are 0 are shown.
    zeros: bool,
    /// `stopped` and `failed`, not `stop` and `fail`.
    long_labels: bool,
    home: bool,
    /// `agents unconfined`, not `unconfined`.
    long_unconfined: bool,
    host: bool,
}

const NARROW: Fit = Fit {
    wide: false,
    long_auth: false,
    zeros: true,
    long_labels: true,
    home: true,
    long_unconfined: true,
    host: true,
};

/// The narrow forms, in the order they give way: zero counts, long labels, the home, the
/// host, the word `agents`. Never the role, never the warning itself.
const FITS: [Fit; 6] = [
    NARROW,
    Fit {
        zeros: false,
        ..NARROW
    },
    Fit {
        zeros: false,
        long_labels: false,
        ..NARROW
    },
    Fit {
        zeros: false,
        long_labels: false,
        home: false,
        ..NARROW
    },
    Fit {
        zeros: false,
        long_labels: false,
        home: false,
        host: false,
        ..NARROW
    },
    Fit {
        zeros: false,
        long_labels: false,
        home: false,
        host: false,
        long_unconfined: false,
        ..NARROW
    },
];

pub fn draw(app: &App, area: Rect, buf: &mut Buffer) {
    if area.is_empty() {
        return;
    }
    // The longest form that fits: narrower screens drop the separators, the name and the
    // long words, then (see FITS) zero counts, long labels, the home, the host and `agents`;
    // never the role or the `unconfined` warning.
    // (A server error at the end is cut as it must be: it does not count.)
    let wide = area.width >= 100;
    let w = usize::from(area.width);
    let full = Fit {
        wide,
        long_auth: wide,
        ..NARROW
    };
    let mut line = build(app, full);
    if line.1 > w && wide {
        line = build(
            app,
            Fit {
                long_auth: false,
                ..full
            },
        );
    }
    if line.1 > w {
        for fit in FITS {
            line = build(app, fit);
            if line.1 <= w {
                break;
            }
        }
    }
    buf.set_line(area.x, area.y, &line.0, area.width);
}

/// Whether the header says agents are unconfined: while any run is live, since no run is
/// behind a rig yet (docs/security.md: a run on the host as the operator's user is not
/// confined).
pub fn agents_unconfined(app: &App) -> bool {
    app.sessions.counts.live + app.sessions.counts.idle > 0
}

/// The header line, and the width of what must fit (all but a trailing server error).
fn build(app: &App, fit: Fit) -> (Line<'static>, usize) {
    let c = app.sessions.counts;
    let wide = fit.wide;
    let sep = if wide { " · " } else { " " };
    let mut spans = Vec::new();
    if wide {
        spans.push(span(app, Role::Header, " proctor "));
        spans.push(span(app, Role::Dim, "· "));
    } else {
        spans.push(span(app, Role::Dim, " "));
    }
    if fit.host {
        spans.push(span(app, Role::Text, text::one_line(&app.host, 24)));
        spans.push(span(app, Role::Dim, sep));
    }
    if fit.home {
        spans.push(span(app, Role::Text, text::one_line(&app.home_label, 40)));
        spans.push(span(app, Role::Dim, " "));
    }
    if fit.host || fit.home {
        spans.pop();
        spans.push(span(app, Role::Dim, " │ "));
    }
    let mut counted = false;
    for (label, short, n, role) in [
        ("live", "live", c.live, Role::StateRunning),
        ("idle", "idle", c.idle, Role::StateIdle),
        ("stopped", "stop", c.stopped, Role::StateStopped),
        ("failed", "fail", c.failed, Role::StateFailed),
        ("lost", "lost", c.lost, Role::StateLost),
        ("blocked", "block", c.blocked, Role::StateFailed),
        // Runs that wait for the person (not a state: an idle or running run may wait).
        ("waiting", "wait", c.waiting, Role::GateAwaitingHuman),
    ] {
        // A state most homes never see is shown only when a run is in it.
        if n == 0 && (!fit.zeros || label == "blocked" || label == "waiting") {
            continue;
        }
        let label = if fit.long_labels { label } else { short };
        spans.push(span(
            app,
            if n > 0 { role } else { Role::Dim },
            format!("{label} {n}"),
        ));
        spans.push(span(app, Role::Dim, sep));
        counted = true;
    }
    if counted {
        spans.pop();
    } else {
        spans.push(span(app, Role::Dim, "no runs"));
    }
    if agents_unconfined(app) {
        spans.push(span(app, Role::Dim, " │ "));
        spans.push(span(
            app,
            Role::Warning,
            if fit.long_unconfined {
                "agents unconfined"
            } else {
                "unconfined"
            },
        ));
    }
    // Publication intents that wait for a person: the one number that needs authority.
    if let Some(Ok(_)) = &app.intents.list {
        let n = app.awaiting_authority();
        spans.push(span(app, Role::Dim, " │ "));
        spans.push(span(
            app,
            if n > 0 {
                Role::GateAwaitingHuman
            } else {
                Role::Dim
            },
            if fit.long_auth {
                format!("awaiting authority {n}")
            } else {
                format!("auth {n}")
            },
        ));
    }
    if let Some(who) = &app.who {
        spans.push(span(app, Role::Dim, " │ "));
        if who.role == crate::auth::Role::Read {
            spans.push(span(app, Role::Warning, "read-only"));
        } else {
            let role = who.role.as_str();
            spans.push(span(
                app,
                Role::Text,
                if wide {
                    format!("role {role}")
                } else {
                    role.to_string()
                },
            ));
        }
    }
    let core: usize = spans.iter().map(|s| s.width()).sum();
    if let Some(e) = &app.sessions.server_error {
        spans.push(span(app, Role::Dim, " │ "));
        spans.push(span(app, Role::Error, format!("server unreachable: {e}")));
    } else if !app.sessions.loaded {
        spans.push(span(app, Role::Dim, " │ "));
        spans.push(span(app, Role::Dim, "loading…"));
    }
    (Line::from(spans), core)
}
