//! The accept loop: one HTTP/1.1 connection per accepted Unix stream, served by the axum
//! router, with what the kernel says about the peer ([`crate::peer::Peer`]) in every request
//! and the connection limits applied.
//!
//! - A peer whose uid is not the server's euid is closed at once, whatever the socket's
//!   mode, and logged.
//! - A connection must deliver a complete request head within `head_timeout` of being
//!   accepted, and within `head_timeout` of its previous response ending: a slow-header
//!   client and an idle keep-alive connection are both closed then. A response being
//!   streamed (an attach) is not idle, however long it lasts.
//! - At most `per_process` connections at once per peer process, `total` in all, and the
//!   processes in the server's own tree (agents) share at most half of `total`, so they
//!   cannot take every slot from a person. A connection over a cap is answered 503
//!   `too_many_connections` and closed.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::peer::{Ancestry, Peer, ServerSelf};

use super::log;

/// The connection limits (`proctor serve` flags; see docs/api.md).
#[derive(Debug, Clone)]
pub struct Limits {
    pub head_timeout: Duration,
    pub per_process: usize,
    pub total: usize,
}

pub const DEFAULT_HEAD_TIMEOUT: Duration = Duration::from_secs(15);
pub const DEFAULT_PER_PROCESS: usize = 32;
pub const DEFAULT_TOTAL: usize = 256;

impl Default for Limits {
    fn default() -> Self {
        Limits {
            head_timeout: DEFAULT_HEAD_TIMEOUT,
            per_process: DEFAULT_PER_PROCESS,
            total: DEFAULT_TOTAL,
        }
    }
}

/// How long open connections may finish their responses once the server stops.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

#[derive(Default)]
struct Counts {
    total: usize,
    in_tree: usize,
    /// Open connections by peer (pid, start time).
    by_process: HashMap<(u32, Option<u64>), usize>,
    refusals: u64,
}

/// One slot, given back when the connection ends.
struct Slot {
    counts: Arc<Mutex<Counts>>,
    key: (u32, Option<u64>),
    in_tree: bool,
}

impl Drop for Slot {
    fn drop(&mut self) {
        if let Ok(mut c) = self.counts.lock() {
            c.total -= 1;
            if self.in_tree {
                c.in_tree -= 1;
            }
            if let Some(n) = c.by_process.get_mut(&self.key) {
                *n -= 1;
                if *n == 0 {
                    c.by_process.remove(&self.key);
                }
            }
        }
    }
}

/// Takes a slot for `peer`, or says which cap refuses it.
fn take_slot(
    counts: &Arc<Mutex<Counts>>,
    limits: &Limits,
    peer: &Peer,
) -> Result<Slot, (String, u64)> {
    let mut c = counts.lock().unwrap_or_else(|e| e.into_inner());
    let key = (peer.pid, peer.start_time);
    let in_tree = peer.in_server_tree();
    let mine = c.by_process.get(&key).copied().unwrap_or(0);
    let refusal = if mine >= limits.per_process {
        Some(format!(
            "this process (pid {}) has {mine} connections open, the most one process may \
             hold (--max-connections-per-process {})",
            peer.pid, limits.per_process
        ))
    } else if c.total >= limits.total {
        Some(format!(
            "the server has {} connections open, the most it holds (--max-connections {})",
            c.total, limits.total
        ))
    } else if in_tree && c.in_tree >= limits.total / 2 {
        Some(format!(
            "the processes of the server's runs have {} connections open, the most they may \
             hold together (half of --max-connections {})",
            c.in_tree, limits.total
        ))
    } else {
        None
    };
    if let Some(why) = refusal {
        c.refusals += 1;
        return Err((why, c.refusals));
    }
    c.total += 1;
    if in_tree {
        c.in_tree += 1;
    }
    *c.by_process.entry(key).or_insert(0) += 1;
    Ok(Slot {
        counts: counts.clone(),
        key,
        in_tree,
    })
}

/// Whether the kernel places a pid in one of the server's run cgroups (a second sign of an
/// agent, besides ancestry).
pub type InARun = Arc<dyn Fn(u32) -> bool + Send + Sync>;

/// Serves `app` on `listener` until `shutdown` resolves; then stops accepting, lets open
/// connections finish their response for a few seconds, and returns.
pub async fn serve(
    listener: tokio::net::UnixListener,
    app: axum::Router,
    limits: Limits,
    in_a_run: InARun,
    shutdown: impl Future<Output = ()>,
) -> std::io::Result<()> {
    let server = Arc::new(ServerSelf::current());
    let counts = Arc::new(Mutex::new(Counts::default()));
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let mut open = tokio::task::JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let stream = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // EMFILE and the like: say so, breathe, go on.
                    log(&format!("accept: {e}"));
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            Some(_) = open.join_next(), if !open.is_empty() => continue,
        };
        let (server, counts, limits, app, in_a_run) = (
            server.clone(),
            counts.clone(),
            limits.clone(),
            app.clone(),
            in_a_run.clone(),
        );
        let stop_rx = stop_rx.clone();
        open.spawn(async move {
            connection(stream, server, counts, limits, app, in_a_run, stop_rx).await;
        });
    }
    drop(listener);
    let _ = stop_tx.send(true);
    let _ = tokio::time::timeout(SHUTDOWN_GRACE + Duration::from_secs(1), async {
        while open.join_next().await.is_some() {}
    })
    .await;
    open.abort_all();
    Ok(())
}

/// Whether refusal number `n` is logged: the first ten, then one in a hundred.
fn quiet_log(n: u64) -> bool {
    n <= 10 || n.is_multiple_of(100)
}

async fn connection(
    mut stream: tokio::net::UnixStream,
    server: Arc<ServerSelf>,
    counts: Arc<Mutex<Counts>>,
    limits: Limits,
    app: axum::Router,
    in_a_run: InARun,
    mut stop: tokio::sync::watch::Receiver<bool>,
) {
    let cred = match stream.peer_cred() {
        Ok(c) => c,
        Err(e) => {
            log(&format!(
                "a connection without peer credentials was closed: {e}"
            ));
            return;
        }
    };
    if cred.uid() != server.euid {
        let n = {
            let mut c = counts.lock().unwrap_or_else(|e| e.into_inner());
            c.refusals += 1;
            c.refusals
        };
        if quiet_log(n) {
            log(&format!(
                "refused a connection from uid {} (pid {}; refusal #{n}): only uid {} may call \
                 this server",
                cred.uid(),
                cred.pid().unwrap_or(0),
                server.euid
            ));
        }
        return;
    }
    let peer = {
        let server = server.clone();
        let pid = cred.pid();
        let uid = cred.uid();
        match tokio::task::spawn_blocking(move || {
            let mut p = Peer::observe(pid, uid, &server);
            if p.ancestry == Ancestry::Outside && in_a_run(p.pid) {
                p.ancestry = Ancestry::InRunCgroup;
            }
            p
        })
        .await
        {
            Ok(p) => p,
            Err(_) => return,
        }
    };
    let _slot = match take_slot(&counts, &limits, &peer) {
        Ok(s) => s,
        Err((why, n)) => {
            // A flood of refused connections does not flood the log.
            if quiet_log(n) {
                log(&format!("refused a connection (refusal #{n}): {why}"));
            }
            let body = serde_json::json!({"error": {"code": "too_many_connections",
                "message": format!("{why}; close some connections and retry")}})
            .to_string();
            let answer = format!(
                "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
                 content-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
            // Answer, close our side, and read what the client sent (bounded) until it
            // closes: a socket closed with unread data resets the peer, which would then
            // lose the answer.
            let _ = tokio::time::timeout(Duration::from_secs(1), async {
                let _ = stream.write_all(answer.as_bytes()).await;
                let _ = stream.shutdown().await;
                let mut sink = [0u8; 4096];
                let mut drained = 0usize;
                while drained < 65536 {
                    match stream.read(&mut sink).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => drained += n,
                    }
                }
            })
            .await;
            return;
        }
    };
    let svc = hyper::service::service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
        req.extensions_mut().insert(peer.clone());
        let mut app = app.clone();
        async move { tower_service::Service::call(&mut app, req).await }
    });
    let conn = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.head_timeout)
        .serve_connection(TokioIo::new(stream), svc);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        _ = async { let _ = stop.wait_for(|s| *s).await; } => {
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(SHUTDOWN_GRACE, conn).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::peer::Ancestry;

    fn peer(pid: u32, ancestry: Ancestry) -> Peer {
        Peer {
            pid,
            uid: 0,
            start_time: Some(pid as u64),
            ancestry,
        }
    }

    #[test]
    fn the_caps_per_process_in_all_and_for_the_tree() {
        let counts = Arc::new(Mutex::new(Counts::default()));
        let limits = Limits {
            head_timeout: DEFAULT_HEAD_TIMEOUT,
            per_process: 2,
            total: 6,
        };
        let a = peer(10, Ancestry::Descendant);
        let s1 = take_slot(&counts, &limits, &a).unwrap();
        let _s2 = take_slot(&counts, &limits, &a).unwrap();
        let e = take_slot(&counts, &limits, &a).err().unwrap().0;
        assert!(e.contains("--max-connections-per-process 2"), "{e}");
        // The tree's share (3 of 6) is reached with one more agent process.
        let b = peer(11, Ancestry::Unknown);
        let _s3 = take_slot(&counts, &limits, &b).unwrap();
        let e = take_slot(&counts, &limits, &b).err().unwrap().0;
        assert!(e.contains("half of --max-connections 6"), "{e}");
        // A person's process still gets in, up to the total.
        let p = peer(20, Ancestry::Outside);
        let p2 = peer(21, Ancestry::Outside);
        let _s4 = take_slot(&counts, &limits, &p).unwrap();
        let _s5 = take_slot(&counts, &limits, &p).unwrap();
        let _s6 = take_slot(&counts, &limits, &p2).unwrap();
        let e = take_slot(&counts, &limits, &p2).err().unwrap().0;
        assert!(e.contains("--max-connections 6"), "{e}");
        // A closed connection gives its slot back.
        drop(s1);
        assert_eq!(counts.lock().unwrap().by_process[&(10, Some(10))], 1);
        let e = take_slot(&counts, &limits, &p2).err();
        assert!(e.is_none(), "a slot was freed");
    }
}
