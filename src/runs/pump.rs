//! The reader loop of one output stream, and the small fd helpers the transports share.
//!
//! Each stream has its own thread blocked in `poll(2)` on two descriptors: the stream and a
//! shared "wake" pipe. The run's waiter writes to the wake pipe when the child has exited but
//! something else (a background grandchild) still holds the stream open past the drain
//! period, so the readers stop and the run can end.

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// A pipe whose both ends are close-on-exec (created atomically with `pipe2`).
pub(crate) fn cloexec_pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [-1 as RawFd; 2];
    // SAFETY: `fds` has room for the two descriptors pipe2 writes.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe2 succeeded, so both are fresh descriptors that nothing else owns.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// Duplicates `fd` atomically with close-on-exec.
pub(crate) fn dup_cloexec(fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: F_DUPFD_CLOEXEC returns a new descriptor or -1; no memory is involved.
    let new = unsafe { libc::fcntl(fd, libc::F_DUPFD_CLOEXEC, 3) };
    if new < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `new` is a fresh descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(new) })
}

/// Sets O_NONBLOCK on the open file description behind `fd` (shared by its duplicates).
pub(crate) fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: plain fcntl flag manipulation on a descriptor we hold.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Writes all of `bytes` to a non-blocking descriptor, waiting for room with `poll` until
/// `deadline`. Returns how many bytes were written and the error, if any.
pub(crate) fn write_all_until(
    fd: RawFd,
    bytes: &[u8],
    deadline: Instant,
) -> Result<(), (usize, io::Error)> {
    let mut done = 0;
    while done < bytes.len() {
        let rest = &bytes[done..];
        // SAFETY: `rest` is a valid buffer of `rest.len()` bytes.
        let n = unsafe { libc::write(fd, rest.as_ptr().cast(), rest.len()) };
        if n > 0 {
            done += n as usize;
            continue;
        }
        let err = io::Error::last_os_error();
        match err.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EAGAIN) => {
                let now = Instant::now();
                if now >= deadline {
                    return Err((done, io::Error::from(io::ErrorKind::TimedOut)));
                }
                let wait = (deadline - now).as_millis().clamp(1, i32::MAX as u128) as i32;
                let mut p = libc::pollfd {
                    fd,
                    events: libc::POLLOUT,
                    revents: 0,
                };
                // SAFETY: one valid pollfd.
                let r = unsafe { libc::poll(&mut p, 1, wait) };
                if r < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
                    return Err((done, io::Error::last_os_error()));
                }
            }
            _ => return Err((done, err)),
        }
    }
    Ok(())
}

/// Reads `fd` until end of file (or EIO, which is how a PTY master reports that the last
/// holder of the slave closed it), or until the wake pipe becomes readable. Each successful
/// read is handed to `sink` at once.
pub(crate) fn pump(fd: OwnedFd, wake: RawFd, buf_len: usize, mut sink: impl FnMut(&[u8])) {
    let mut buf = vec![0u8; buf_len.max(1)];
    loop {
        let mut fds = [
            libc::pollfd {
                fd: fd.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: wake,
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: two valid pollfds; -1 waits without a timeout.
        let r = unsafe { libc::poll(fds.as_mut_ptr(), 2, -1) };
        if r < 0 {
            if io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return;
        }
        if fds[1].revents != 0 {
            return;
        }
        if fds[0].revents == 0 {
            continue;
        }
        // SAFETY: `buf` is a valid writable buffer of `buf.len()` bytes.
        let n = unsafe { libc::read(fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n > 0 {
            sink(&buf[..n as usize]);
        } else if n == 0 {
            return;
        } else {
            match io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR) | Some(libc::EAGAIN) => continue,
                // EIO: PTY slave closed by its last holder. Anything else: the stream is
                // unusable; either way this stream is over.
                _ => return,
            }
        }
    }
}

/// Counts the output streams still being read, so the waiter can wait for them.
pub(crate) struct OpenStreams {
    open: Mutex<usize>,
    cond: Condvar,
}

impl OpenStreams {
    pub(crate) fn new(n: usize) -> Self {
        OpenStreams {
            open: Mutex::new(n),
            cond: Condvar::new(),
        }
    }

    pub(crate) fn close_one(&self) {
        let mut g = self.open.lock().unwrap_or_else(|e| e.into_inner());
        *g = g.saturating_sub(1);
        self.cond.notify_all();
    }

    /// Waits until every stream is closed or `timeout` passes; returns whether all closed.
    pub(crate) fn wait_all_closed(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut g = self.open.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if *g == 0 {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            g = self
                .cond
                .wait_timeout(g, deadline - now)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}
