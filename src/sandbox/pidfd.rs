//! Signals through a pidfd: to the process it names, never another's,
//! even if its number was taken again.

use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

/// Send `signal` (0: only check it lives) to the process `pidfd` names.
pub(crate) fn signal(pidfd: &OwnedFd, signal: i32) -> io::Result<()> {
    // SAFETY: pidfd_send_signal on a pidfd we hold, no info struct.
    let r = unsafe {
        libc::syscall(
            libc::SYS_pidfd_send_signal,
            pidfd.as_raw_fd(),
            signal,
            std::ptr::null::<libc::siginfo_t>(),
            0,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}
