//! The small fd helpers the transports share (the streams themselves are read by the
//! reactor, `super::reactor`).

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::time::Instant;

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
