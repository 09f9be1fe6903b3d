//! Signals to a process group or one process: the one guarded `kill(2)` every stop path
//! uses (runs, evidence checks, the sessions' sweep of orphans). Support layer: no proctor
//! state, only the kernel call and its guard.

use std::io;

/// The pid `kill(2)` may address safely: above 1 and a valid `pid_t`. 0 would mean "my own
/// group" (the server's), 1 init, and a negative `-1` "every process I may signal".
fn target(pid: u32) -> io::Result<libc::pid_t> {
    libc::pid_t::try_from(pid)
        .ok()
        .filter(|&p| p > 1)
        .ok_or_else(|| io::Error::from_raw_os_error(libc::EINVAL))
}

/// Sends `sig` to the process group `pgid`. Refuses groups 0 and 1 and any `pgid` that is
/// not a positive `pid_t` (EINVAL), which `kill(2)` would read as "my own group", "every
/// process" or another group.
pub fn signal_group(pgid: u32, sig: libc::c_int) -> io::Result<()> {
    let pgid = target(pgid)?;
    // SAFETY: a negative pid addresses exactly the process group; no memory is involved.
    if unsafe { libc::kill(-pgid, sig) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Sends `sig` to one process, with the same guard as [`signal_group`].
pub fn signal_process(pid: u32, sig: libc::c_int) -> io::Result<()> {
    let pid = target(pid)?;
    // SAFETY: a positive pid addresses one process; no memory is involved.
    if unsafe { libc::kill(pid, sig) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guard_refuses_0_1_and_negative_pids() {
        // Signal 0 only checks: nothing is sent even if the guard let one through.
        for bad in [
            0u32,
            1,
            (-1i32) as u32,
            (-42i32) as u32,
            i32::MAX as u32 + 1,
            u32::MAX,
        ] {
            for f in [signal_group, signal_process] {
                let e = f(bad, 0).expect_err(&format!("{bad} must be refused"));
                assert_eq!(e.raw_os_error(), Some(libc::EINVAL), "{bad}: {e}");
            }
        }
    }

    #[test]
    fn a_real_group_and_process_are_signalled() {
        use std::os::unix::process::CommandExt;
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = child.id();
        signal_group(pid, 0).unwrap();
        signal_process(pid, 0).unwrap();
        signal_group(pid, libc::SIGKILL).unwrap();
        let status = child.wait().unwrap();
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(status.signal(), Some(libc::SIGKILL));
    }
}
