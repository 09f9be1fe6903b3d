//! Dialogs drawn over the cockpit: help (from the keymap), the command palette, prompts
//! and confirmations.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Block, BorderType, Borders, Clear, Widget};
use unicode_width::UnicodeWidthStr;

use super::span;
use crate::text;
use crate::tui::app::{App, Modal, Mode, Pane, palette_matches};
use crate::tui::keymap::Context;
use crate::tui::role::Role;

fn centered(area: Rect, w: u16, h: u16) -> Rect {
    let w = w.min(area.width);
    let h = h.min(area.height);
    Rect::new(
        area.x + (area.width - w) / 2,
        area.y + (area.height - h) / 2,
        w,
        h,
    )
}

fn frame(app: &App, area: Rect, title: &str, buf: &mut Buffer) -> Rect {
    Clear.render(area, buf);
    let block = Block::default()
        .borders(Borders::ALL)
        .border_type(BorderType::Rounded)
        .border_style(app.looks.style(Role::BorderFocused))
        .style(app.looks.style(Role::Modal))
        .title(Line::from(span(app, Role::Title, format!(" {title} "))));
    let inner = block.inner(area);
    block.render(area, buf);
    inner
}

/// Draws the open dialog; returns where the text cursor goes.
pub fn draw(app: &App, area: Rect, buf: &mut Buffer) -> Option<(u16, u16)> {
    let Mode::Modal(m) = &app.mode else {
        return None;
    };
    match m {
        Modal::Help { scroll } => {
            help(app, area, *scroll, buf);
            None
        }
        Modal::Palette { input, selected } => {
            let r = centered(area, 70, 20);
            let inner = frame(app, r, "Actions", buf);
            if inner.height < 2 {
                return None;
            }
            let typed = text::one_line(&input.text, usize::from(inner.width.saturating_sub(3)));
            buf.set_line(
                inner.x,
                inner.y,
                &Line::from(vec![
                    span(app, Role::Key, ": "),
                    span(app, Role::Input, typed.clone()),
                ]),
                inner.width,
            );
            let contexts = [Context::Sessions, Context::Global];
            let matches = palette_matches(&input.text);
            let rows = usize::from(inner.height - 1);
            let sel = (*selected).min(matches.len().saturating_sub(1));
            let start = sel.saturating_sub(rows.saturating_sub(1));
            for (k, a) in matches.iter().enumerate().skip(start).take(rows) {
                let y = inner.y + 1 + (k - start) as u16;
                let ok = app.can(*a);
                let key = app.keymap.key_for(&contexts, *a).unwrap_or_default();
                let mut st = app
                    .looks
                    .style(if ok { Role::Text } else { Role::Unavailable });
                if k == sel {
                    st = st.patch(app.looks.style(Role::Selected));
                }
                let line = format!(
                    " {:<16} {:<10} {}{}",
                    a.name(),
                    key,
                    a.describe(),
                    if ok { "" } else { " (unavailable)" }
                );
                buf.set_stringn(inner.x, y, line, usize::from(inner.width), st);
            }
            Some((inner.x + 2 + typed.width() as u16, inner.y))
        }
        Modal::Prompt(p) => {
            let r = centered(area, 72, 7);
            let inner = frame(app, r, &p.title, buf);
            if inner.height == 0 {
                return None;
            }
            let w = usize::from(inner.width.saturating_sub(2));
            // The operator's own typing, still shown through the sanitiser (a paste may hold
            // anything).
            let shown = text::one_line(&p.input.text, usize::MAX);
            let tail: String = {
                let width = shown.width();
                if width <= w {
                    shown.clone()
                } else {
                    let mut s: String = shown.chars().rev().collect();
                    while s.width() > w.saturating_sub(1) {
                        s.pop();
                    }
                    format!("…{}", s.chars().rev().collect::<String>())
                }
            };
            buf.set_line(
                inner.x,
                inner.y,
                &Line::from(vec![
                    span(app, Role::Key, "> "),
                    span(app, Role::Input, tail.clone()),
                ]),
                inner.width,
            );
            let mut y = inner.y + 1;
            if y < inner.y + inner.height {
                buf.set_stringn(
                    inner.x,
                    y,
                    text::one_line(&p.hint, usize::from(inner.width)),
                    usize::from(inner.width),
                    app.looks.style(Role::Dim),
                );
                y += 1;
            }
            if p.busy && y < inner.y + inner.height {
                buf.set_stringn(inner.x, y, "working…", 20, app.looks.style(Role::Dim));
            }
            if let Some(e) = &p.error {
                let lines = wrap(e, usize::from(inner.width));
                for l in lines {
                    if y >= inner.y + inner.height {
                        break;
                    }
                    buf.set_stringn(
                        inner.x,
                        y,
                        l,
                        usize::from(inner.width),
                        app.looks.style(Role::Error),
                    );
                    y += 1;
                }
            }
            (!p.busy).then_some((inner.x + 2 + tail.width() as u16, inner.y))
        }
        Modal::Confirm(c) => {
            let r = centered(area, 64, 8);
            let inner = frame(app, r, "Confirm", buf);
            let mut y = inner.y;
            for l in wrap(&c.question, usize::from(inner.width)) {
                if y >= inner.y + inner.height {
                    break;
                }
                buf.set_stringn(
                    inner.x,
                    y,
                    l,
                    usize::from(inner.width),
                    app.looks.style(Role::Warning),
                );
                y += 1;
            }
            if y < inner.y + inner.height {
                let line = if c.busy {
                    Line::from(span(app, Role::Dim, "working…"))
                } else {
                    Line::from(vec![
                        span(app, Role::Key, "y"),
                        span(app, Role::Text, " yes   "),
                        span(app, Role::Key, "n"),
                        span(app, Role::Text, "/"),
                        span(app, Role::Key, "esc"),
                        span(app, Role::Text, " no"),
                    ])
                };
                buf.set_line(inner.x, y, &line, inner.width);
                y += 1;
            }
            if let Some(e) = &c.error {
                for l in wrap(e, usize::from(inner.width)) {
                    if y >= inner.y + inner.height {
                        break;
                    }
                    buf.set_stringn(
                        inner.x,
                        y,
                        l,
                        usize::from(inner.width),
                        app.looks.style(Role::Error),
                    );
                    y += 1;
                }
            }
            None
        }
    }
}

/// Splits a sanitised message into lines of at most `w` columns, at spaces when possible.
fn wrap(s: &str, w: usize) -> Vec<String> {
    let s = text::one_line(s, usize::MAX);
    let mut out = Vec::new();
    let mut line = String::new();
    for word in s.split(' ') {
        let extra = usize::from(!line.is_empty()) + word.width();
        if !line.is_empty() && line.width() + extra > w {
            out.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        out.push(line);
    }
    out.into_iter().map(|l| text::one_line(&l, w)).collect()
}

fn help(app: &App, area: Rect, scroll: usize, buf: &mut Buffer) {
    let r = centered(area, 76, area.height.saturating_sub(2).max(6));
    let inner = frame(app, r, "Keys", buf);
    let pane = match app.focus {
        Pane::Sessions => Context::Sessions,
        Pane::Live => Context::Live,
        Pane::Events => Context::Events,
    };
    let mut lines: Vec<Line<'_>> = Vec::new();
    for (ctx, bindings) in app
        .keymap
        .effective_bindings(&[pane, Context::Global, Context::Attach])
    {
        lines.push(Line::from(span(app, Role::Title, ctx.title().to_string())));
        for b in bindings {
            let ok = app.can(b.action);
            let role = if ok { Role::Text } else { Role::Unavailable };
            lines.push(Line::from(vec![
                span(app, Role::Key, format!("  {:<16} ", b.keys)),
                span(
                    app,
                    role,
                    format!(
                        "{}{}",
                        b.description,
                        if ok {
                            ""
                        } else {
                            " (unavailable with this token)"
                        }
                    ),
                ),
            ]));
        }
    }
    let h = usize::from(inner.height);
    let scroll = scroll.min(lines.len().saturating_sub(h));
    for (k, l) in lines.iter().skip(scroll).take(h).enumerate() {
        buf.set_line(inner.x, inner.y + k as u16, l, inner.width);
    }
}
