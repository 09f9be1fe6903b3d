//! The host-controlled channels of `--allow`: the only way out of a rig. Each allowed service
//! is reached through a relay the host runs and that connects to exactly that `HOST:PORT`:
//! - a VM: QEMU's `guestfwd=tcp:<guest-ip>:<port>-cmd:<proctor> rig relay --stdio --to
//!   HOST:PORT`, one relay process per connection, its stdin/stdout the connection;
//! - a namespace rig: [`HostRelay`] listens on `<rig>/run/allow-N.sock` (bind-mounted into the
//!   sandbox) and connects each accepted stream to `HOST:PORT`; inside, `proctor rig relay
//!   --listen 127.0.0.N:PORT --to-unix /proctor/run/allow-N.sock` accepts the guest's TCP.
//!
//! Helper B builds this file.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use super::RigError;
use super::model::Allow;

/// How long a relay waits for the allowed service to accept.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// A host-side listener for one allowed service; dropped: it stops accepting and removes its
/// socket.
pub struct HostRelay {
    socket: PathBuf,
    stop: Arc<AtomicBool>,
}

impl HostRelay {
    /// Listens on `socket` (0600) and connects each accepted stream to exactly
    /// `allow.host:allow.port`.
    pub fn start(socket: &Path, allow: &Allow) -> Result<HostRelay, RigError> {
        let _ = std::fs::remove_file(socket);
        let l = UnixListener::bind(socket)
            .map_err(|e| RigError::Internal(format!("relay: bind {}: {e}", socket.display())))?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600))
            .map_err(RigError::internal)?;
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = Arc::clone(&stop);
        let to = target(&allow.host, allow.port);
        std::thread::Builder::new()
            .name("rig-host-relay".into())
            .spawn(move || {
                for conn in l.incoming() {
                    if s2.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(u) = conn else { continue };
                    let to = to.clone();
                    let _ = std::thread::Builder::new()
                        .name("rig-relay-conn".into())
                        .spawn(move || {
                            if let Ok(t) = connect_tcp(&to) {
                                let (Ok(u2), Ok(t2)) = (u.try_clone(), t.try_clone()) else {
                                    return;
                                };
                                pump_pair(Box::new(u), Box::new(t2), Box::new(t), Box::new(u2));
                            }
                        });
                }
            })
            .map_err(RigError::internal)?;
        Ok(HostRelay {
            socket: socket.to_path_buf(),
            stop,
        })
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }
}

impl Drop for HostRelay {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept so the thread sees the flag.
        let _ = UnixStream::connect(&self.socket);
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// `HOST:PORT`, with brackets for an IPv6 literal.
pub fn target(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

fn connect_tcp(to: &str) -> std::io::Result<TcpStream> {
    let mut last = std::io::Error::other(format!("{to} resolves to no address"));
    for a in to.to_socket_addrs()? {
        match TcpStream::connect_timeout(&a, CONNECT_TIMEOUT) {
            Ok(s) => return Ok(s),
            Err(e) => last = e,
        }
    }
    Err(last)
}

/// A stream end that can be shut down.
trait Half: Read + Write + Send {
    fn close(&self, how: Shutdown);
}
impl Half for TcpStream {
    fn close(&self, how: Shutdown) {
        let _ = self.shutdown(how);
    }
}
impl Half for UnixStream {
    fn close(&self, how: Shutdown) {
        let _ = self.shutdown(how);
    }
}

/// Copies `a_in → b_out` and `b_in → a_out` (each pair the two handles of one stream);
/// when either direction ends, both streams are closed together.
fn pump_pair(a_in: Box<dyn Half>, b_out: Box<dyn Half>, b_in: Box<dyn Half>, a_out: Box<dyn Half>) {
    let h = std::thread::spawn(move || copy_then_close(a_in, b_out));
    copy_then_close(b_in, a_out);
    let _ = h.join();
}

fn copy_then_close(mut from: Box<dyn Half>, mut to: Box<dyn Half>) {
    let _ = std::io::copy(&mut from, &mut to);
    from.close(Shutdown::Both);
    to.close(Shutdown::Both);
}
/// How `proctor rig relay` (hidden) was asked to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RelayMode {
    /// stdin/stdout ⇄ TCP `to`.
    Stdio { to: String },
    /// TCP listener `listen` ⇄ the Unix socket `to_unix`, one pair per connection.
    ListenToUnix {
        listen: String,
        to_unix: std::path::PathBuf,
    },
}

/// `proctor rig relay`: runs until its stream ends (`Stdio`) or forever (`ListenToUnix`).
pub fn run(mode: &RelayMode) -> Result<(), RigError> {
    match mode {
        RelayMode::Stdio { to } => {
            let t = connect_tcp(to)
                .map_err(|e| RigError::Unavailable(format!("relay: connect {to}: {e}")))?;
            let t2 = t.try_clone().map_err(RigError::internal)?;
            let up = std::thread::spawn(move || {
                let mut t2 = t2;
                let _ = std::io::copy(&mut std::io::stdin().lock(), &mut t2);
                let _ = t2.shutdown(Shutdown::Write);
            });
            let mut t = t;
            let _ = std::io::copy(&mut t, &mut std::io::stdout().lock());
            let _ = t.shutdown(Shutdown::Both);
            drop(up);
            Ok(())
        }
        RelayMode::ListenToUnix { listen, to_unix } => {
            let l = std::net::TcpListener::bind(listen.as_str())
                .map_err(|e| RigError::Internal(format!("relay: listen on {listen}: {e}")))?;
            for conn in l.incoming() {
                let Ok(t) = conn else { continue };
                let to_unix = to_unix.clone();
                std::thread::spawn(move || {
                    let Ok(u) = UnixStream::connect(&to_unix) else {
                        return;
                    };
                    let (Ok(t2), Ok(u2)) = (t.try_clone(), u.try_clone()) else {
                        return;
                    };
                    pump_pair(Box::new(t), Box::new(u2), Box::new(u), Box::new(t2));
                });
            }
            Ok(())
        }
    }
}
