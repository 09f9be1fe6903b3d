//! A small reader of the server's event streams (`GET …/attach`), for the cockpit.
//!
//! The session CLI's branch adds a full `Client::stream`; until it is merged, this reader is
//! the cockpit's one way to open a stream, behind [`open`]. It follows the WHATWG
//! "Interpreting an event stream" rules the server's output needs: lines end with LF, CR or
//! CRLF; `:` starts a comment; one leading space is dropped from a value; `data` lines join
//! with LF; a blank line dispatches an event that has data.

use std::collections::VecDeque;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Method, Request, header};
use hyper_util::rt::TokioIo;

use crate::client::{Client, ClientError};

/// One dispatched event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` field; `message` when none was given.
    pub event: String,
    /// The `data:` lines joined with LF.
    pub data: String,
    /// The last `id:` seen on the stream.
    pub id: Option<String>,
}

/// An incremental parser: feed chunks cut anywhere.
#[derive(Debug, Default)]
pub struct Parser {
    line: Vec<u8>,
    after_cr: bool,
    event: String,
    data: String,
    last_id: Option<String>,
}

impl Parser {
    pub fn feed(&mut self, bytes: &[u8], out: &mut VecDeque<SseEvent>) {
        for &b in bytes {
            match b {
                b'\n' if self.after_cr => self.after_cr = false,
                b'\r' | b'\n' => {
                    self.after_cr = b == b'\r';
                    let line = std::mem::take(&mut self.line);
                    if let Some(ev) = self.line_done(&line) {
                        out.push_back(ev);
                    }
                }
                _ => {
                    self.after_cr = false;
                    self.line.push(b);
                }
            }
        }
    }

    fn line_done(&mut self, raw: &[u8]) -> Option<SseEvent> {
        let line = String::from_utf8_lossy(raw);
        if line.is_empty() {
            let event = std::mem::take(&mut self.event);
            if self.data.is_empty() {
                return None;
            }
            let mut data = std::mem::take(&mut self.data);
            data.pop();
            return Some(SseEvent {
                event: if event.is_empty() {
                    "message".into()
                } else {
                    event
                },
                data,
                id: self.last_id.clone(),
            });
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = match line.split_once(':') {
            Some((f, v)) => (f, v.strip_prefix(' ').unwrap_or(v)),
            None => (&*line, ""),
        };
        match field {
            "event" => self.event = value.to_string(),
            "data" => {
                self.data.push_str(value);
                self.data.push('\n');
            }
            "id" if !value.contains('\0') => {
                self.last_id = (!value.is_empty()).then(|| value.to_string());
            }
            _ => {}
        }
        None
    }
}

/// An open stream.
pub struct EventStream {
    body: hyper::body::Incoming,
    parser: Parser,
    ready: VecDeque<SseEvent>,
    done: bool,
}

impl EventStream {
    /// The next event; `Ok(None)` once the server closed the stream. Cancel-safe.
    pub async fn next(&mut self) -> Result<Option<SseEvent>, ClientError> {
        loop {
            if let Some(ev) = self.ready.pop_front() {
                return Ok(Some(ev));
            }
            if self.done {
                return Ok(None);
            }
            match self.body.frame().await {
                None => self.done = true,
                Some(Err(e)) => {
                    self.done = true;
                    return Err(ClientError::Http(format!("the event stream broke: {e}")));
                }
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.parser.feed(&data, &mut self.ready);
                    }
                }
            }
        }
    }
}

/// Opens `GET path` as an event stream with the client's token. A non-2xx answer is a
/// [`ClientError::Api`] carrying the server's message.
pub async fn open(client: &Client, path: &str) -> Result<EventStream, ClientError> {
    let http = |e: &dyn std::fmt::Display| ClientError::Http(e.to_string());
    let stream = tokio::net::UnixStream::connect(&client.socket)
        .await
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused => {
                ClientError::NotRunning(client.socket.clone())
            }
            _ => ClientError::Io {
                op: "connect to",
                path: client.socket.clone(),
                err: e,
            },
        })?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(|e| http(&e))?;
    tokio::spawn(conn);
    let mut req = Request::builder()
        .method(Method::GET)
        .uri(path)
        .header(header::HOST, "proctor")
        .header(header::ACCEPT, "text/event-stream");
    if let Some(t) = client.bearer() {
        req = req.header(header::AUTHORIZATION, format!("Bearer {t}"));
    }
    let req = req.body(Full::new(Bytes::new())).map_err(|e| http(&e))?;
    let resp = sender.send_request(req).await.map_err(|e| http(&e))?;
    let status = resp.status();
    if !status.is_success() {
        let body = resp
            .into_body()
            .collect()
            .await
            .map_err(|e| http(&e))?
            .to_bytes();
        let value: serde_json::Value =
            serde_json::from_slice(&body).unwrap_or(serde_json::Value::Null);
        return Err(ClientError::Api {
            status,
            code: value["error"]["code"].as_str().unwrap_or("").to_string(),
            message: value["error"]["message"]
                .as_str()
                .unwrap_or("(no message)")
                .to_string(),
        });
    }
    Ok(EventStream {
        body: resp.into_body(),
        parser: Parser::default(),
        ready: VecDeque::new(),
        done: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(chunks: &[&[u8]]) -> Vec<SseEvent> {
        let mut p = Parser::default();
        let mut out = VecDeque::new();
        for c in chunks {
            p.feed(c, &mut out);
        }
        out.into()
    }

    #[test]
    fn events_survive_any_split_and_line_ending() {
        for eol in ["\n", "\r", "\r\n"] {
            let text = format!(
                ": ka{eol}{eol}event: output{eol}id: 7{eol}data: {{\"a\":{eol}data:1}}{eol}{eol}event: end{eol}data: x{eol}{eol}"
            );
            let bytes = text.as_bytes();
            for cut in 0..=bytes.len() {
                let evs = all(&[&bytes[..cut], &bytes[cut..]]);
                assert_eq!(evs.len(), 2, "{eol:?} {cut}");
                assert_eq!(evs[0].event, "output");
                assert_eq!(evs[0].data, "{\"a\":\n1}");
                assert_eq!(evs[0].id.as_deref(), Some("7"));
                assert_eq!(evs[1].event, "end");
                assert_eq!(evs[1].data, "x");
            }
        }
    }
}
