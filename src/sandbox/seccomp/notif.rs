//! One notification of the seccomp filter: the answer sent back, and what
//! the supervisor may do while the caller waits (check it still does,
//! copy one of its descriptors).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// The answer to one notification.
pub(super) enum Answer {
    /// The return value and negative errno.
    Done(i64, i32),
    /// Let the kernel run the call (only where the call cannot reach what
    /// the check was about: see `supervised_connect`; or where nothing was
    /// checked, only observed).
    Continue,
    /// Sent later, by the thread that waits for a lock (see
    /// [`super::locks`]).
    Later,
}

/// Send `answer` to notification `id` (nothing for [`Answer::Later`]). A
/// failure (`ENOENT`) means the caller is gone.
pub(super) fn send(listener: RawFd, id: u64, answer: Answer) {
    let (val, error, flags) = match answer {
        Answer::Done(val, error) => (val, error, 0),
        Answer::Continue => (0, 0, libc::SECCOMP_USER_NOTIF_FLAG_CONTINUE as u32),
        Answer::Later => return,
    };
    let mut resp = libc::seccomp_notif_resp {
        id,
        val,
        error,
        flags,
    };
    // SAFETY: the ioctl reads the struct on the stack.
    unsafe {
        libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_SEND, &mut resp);
    }
}

/// `pidfd_open()`'s flag for a thread's pidfd (`O_EXCL`).
const PIDFD_THREAD: libc::c_int = libc::O_EXCL;

/// A copy of the descriptor `target` of the process `pid`, made only
/// while notification `id` is still pending (so `pid` still names the
/// caller): `Err` with the errno to answer.
pub(super) fn take_fd(listener: RawFd, pid: u32, target: RawFd, id: u64) -> Result<OwnedFd, i32> {
    // The caller may be any thread of its process: its own id opens only
    // as a thread's pidfd (PIDFD_THREAD, Linux 6.9). Without it,
    // pidfd_open() of a thread that is not its process's first fails
    // (EINVAL), and a lock would be judged by /proc on the number alone
    // (see `locks::by_proc`), a connect refused.
    // SAFETY: pidfd_open with integer arguments; the result is checked.
    let mut pidfd =
        unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, PIDFD_THREAD) };
    if pidfd < 0 {
        // SAFETY: as above; a kernel older than PIDFD_THREAD.
        pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    }
    if pidfd < 0 {
        return Err(libc::EPERM);
    }
    // SAFETY: a new descriptor we own.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as RawFd) };
    // SAFETY: pidfd_getfd with integer arguments; the result is checked.
    let sock = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), target, 0) };
    if sock < 0 {
        let e = io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EPERM);
        return Err(if e == libc::EBADF {
            libc::EBADF
        } else {
            libc::EPERM
        });
    }
    // SAFETY: a new descriptor we own.
    let sock = unsafe { OwnedFd::from_raw_fd(sock as RawFd) };
    still_pending(listener, id)?;
    Ok(sock)
}

/// `Ok` while notification `id` is pending (its process has not gone, and
/// its pid not been reused).
pub(super) fn still_pending(listener: RawFd, id: u64) -> Result<(), i32> {
    let mut id = id;
    // SAFETY: the ioctl reads a u64 on the stack.
    if unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_ID_VALID, &mut id) } < 0 {
        return Err(libc::EPERM);
    }
    Ok(())
}

/// The calling thread's last errno.
pub(super) fn last() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}
