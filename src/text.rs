//! Terminal-safe text: the only module that decides what untrusted text may reach an
//! operator's terminal.

/// One line for display: no control characters, at most `max_width` characters.
pub fn one_line(input: &str, max_width: usize) -> String {
    let clean: String = input.chars().filter(|c| !c.is_control()).collect();
    if clean.chars().count() <= max_width {
        return clean;
    }
    let mut out: String = clean.chars().take(max_width.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// Several lines for display: as [`one_line`] per line, LF kept, no width limit.
pub fn multi_line(input: &str) -> String {
    input
        .split('\n')
        .map(|l| one_line(l, usize::MAX))
        .collect::<Vec<_>>()
        .join("\n")
}
