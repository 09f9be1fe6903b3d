//! Reconnecting a live view whose stream died (`attach`, `tail --follow`; issue 19 §1).
//!
//! When the stream ends without an `end` event (the server went away, or the ssh link to a
//! `--host` dropped), the view prints one notice and tries again with backoff (0.2 s,
//! doubling, at most 5 s between tries, for as long as it is attached or following). A try
//! probes the server first, so a server of another protocol is still refused (and ends the
//! view), then opens the stream from the seq that follows the last one shown: no byte is
//! shown twice and none is skipped (a `lag` event says when the ring evicted some
//! meanwhile). Over `--host`, every try is a new `ssh` (`Remote::dial`): a dead channel is
//! never reused.

use std::time::Duration;

use crate::client::{Client, ClientError, EventStream};
use crate::text;

/// The first wait before a try.
pub const FIRST_DELAY: Duration = Duration::from_millis(200);
/// The longest wait between two tries.
pub const MAX_DELAY: Duration = Duration::from_secs(5);

/// The waits between tries: 0.2 s, doubling, capped at 5 s.
pub struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Backoff {
        Backoff { next: FIRST_DELAY }
    }
}

impl Backoff {
    /// The wait before the next try.
    pub fn delay(&mut self) -> Duration {
        let d = self.next;
        self.next = (d * 2).min(MAX_DELAY);
        d
    }
}

/// Why a try did not bring the stream back.
pub enum Failed {
    /// The link or the server is not back yet: try again.
    Retry,
    /// The server answered and refused (another protocol, a refusal of the stream): stop.
    Fatal(ClientError),
}

/// One clean line saying why a stream stopped (`None`: the server closed it).
pub fn lost_reason(err: Option<&ClientError>) -> String {
    match err {
        None => "the server closed the stream".to_string(),
        Some(ClientError::Http(m)) => format!(
            "the stream broke ({})",
            text::one_line(m.strip_prefix("the event stream broke: ").unwrap_or(m), 300)
        ),
        Some(e) => format!("the stream broke ({})", text::one_line(&e.to_string(), 300)),
    }
}

/// The command that shows what followed `next` (with `--host` when the server is remote).
pub fn tail_from(c: &Client, run_ref: &str, next: u64) -> String {
    let host = c
        .remote_host()
        .map(|h| format!("--host {} ", text::one_line(h, 100)))
        .unwrap_or_default();
    format!("proctor {host}session tail --from {next} {run_ref}")
}

/// One try, after `delay`: the server answers with this client's protocol, then the stream
/// at `path` opens.
pub async fn attempt(c: &Client, path: &str, delay: Duration) -> Result<EventStream, Failed> {
    tokio::time::sleep(delay).await;
    match c.probe().await {
        Ok(Some(_)) => {}
        Ok(None) => return Err(Failed::Retry),
        Err(e @ (ClientError::Protocol { .. } | ClientError::RemoteProtocol { .. })) => {
            return Err(Failed::Fatal(e));
        }
        Err(_) => return Err(Failed::Retry),
    }
    match c.stream(path).await {
        Ok(s) => Ok(s),
        Err(ClientError::Api { status, .. }) if status.is_server_error() => Err(Failed::Retry),
        Err(e @ ClientError::Api { .. }) => Err(Failed::Fatal(e)),
        Err(_) => Err(Failed::Retry),
    }
}

/// Tries until the stream at `path` is back (forever), or a try meets a refusal.
pub async fn until_back(c: &Client, path: &str) -> Result<EventStream, ClientError> {
    let mut backoff = Backoff::default();
    loop {
        match attempt(c, path, backoff.delay()).await {
            Ok(s) => return Ok(s),
            Err(Failed::Fatal(e)) => return Err(e),
            Err(Failed::Retry) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_waits_double_from_a_fifth_of_a_second_to_five_seconds() {
        let mut b = Backoff::default();
        let got: Vec<u128> = (0..8).map(|_| b.delay().as_millis()).collect();
        assert_eq!(got, [200, 400, 800, 1600, 3200, 5000, 5000, 5000]);
    }
}
