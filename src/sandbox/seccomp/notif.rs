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

/// Read `buf.len()` bytes at `addr` in the memory of `pid` (at most: a
/// range ending in an unmapped page reads short): how many, or the errno
/// (`EPERM`, `ENOSYS` as the kernel said, else `EFAULT`).
pub(super) fn read_memory(pid: u32, addr: u64, buf: &mut [u8]) -> Result<usize, i32> {
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: reads at most `buf.len()` bytes into `buf`; the remote range
    // is the caller's, checked by the kernel.
    let n = unsafe { libc::process_vm_readv(pid as libc::pid_t, &local, 1, &remote, 1, 0) };
    if n < 0 {
        let e = last();
        return Err(if e == libc::EPERM || e == libc::ENOSYS {
            e
        } else {
            libc::EFAULT
        });
    }
    Ok(n as usize)
}

/// The NUL-terminated string at `addr` in the memory of `pid`, read a page
/// at a time (a string may end just before an unmapped page); `None` when
/// it cannot be read or takes more than `max` bytes with its NUL.
pub(super) fn read_string(pid: u32, addr: u64, max: usize) -> Option<Vec<u8>> {
    const PAGE: u64 = 4096;
    let mut out = Vec::new();
    let mut at = addr;
    let mut buf = [0u8; PAGE as usize];
    while out.len() < max {
        let want = (PAGE - at % PAGE).min((max - out.len()) as u64) as usize;
        let n = read_memory(pid, at, &mut buf[..want]).ok().filter(|n| *n > 0)?;
        let got = &buf[..n];
        if let Some(end) = memchr::memchr(0, got) {
            out.extend_from_slice(&got[..end]);
            return Some(out);
        }
        out.extend_from_slice(got);
        at = at.checked_add(n as u64)?;
    }
    None
}

/// Answer notification `id` with `file`, put in the caller's table
/// (close-on-exec if `cloexec`) as the call's result.
pub(super) fn hand_over(listener: RawFd, id: u64, file: &OwnedFd, cloexec: bool) -> Answer {
    let mut add = libc::seccomp_notif_addfd {
        id,
        flags: libc::SECCOMP_ADDFD_FLAG_SEND as u32,
        srcfd: file.as_raw_fd() as u32,
        newfd: 0,
        newfd_flags: if cloexec { libc::O_CLOEXEC as u32 } else { 0 },
    };
    // SAFETY: the ioctl reads the struct on the stack; with FLAG_SEND it
    // answers the call with the new descriptor's number.
    if unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_ADDFD, &mut add) } < 0 {
        return Answer::Done(0, -last());
    }
    Answer::Later
}

#[cfg(test)]
mod tests {
    use super::read_string;

    #[test]
    fn a_path_is_read_from_memory_up_to_its_nul_across_pages() {
        // A string that straddles a page boundary, in our own memory.
        let mut v = vec![b'x'; 16384];
        let boundary = (4096 - v.as_ptr() as usize % 4096) % 4096 + 4096;
        let start = boundary - 5;
        v[start..start + 12].copy_from_slice(b"/etc/hosts\0\0");
        let got = read_string(std::process::id(), v[start..].as_ptr() as u64, 4096);
        assert_eq!(got.as_deref(), Some(&b"/etc/hosts"[..]));
        // Unmapped memory: nothing.
        assert_eq!(read_string(std::process::id(), 8, 4096), None);
        // Longer than asked for: nothing.
        let got = read_string(std::process::id(), v[start..].as_ptr() as u64, 11);
        assert_eq!(got.as_deref(), Some(&b"/etc/hosts"[..]));
        let got = read_string(std::process::id(), v[start..].as_ptr() as u64, 10);
        assert_eq!(got, None);
    }
}
