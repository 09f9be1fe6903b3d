//! The server's log line (support: the server and the session manager write through it).

/// One line to the server's log (stderr, which a detached server points at its log file).
pub fn log(line: &str) {
    let at = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true);
    eprintln!("{at} {}", crate::text::one_line(line, 4096));
}
