//! The server's inotify instances without namespaces.
//!
//! The kernel counts inotify instances per user: without a user namespace
//! of its own (where [`crate::sandbox::inotify`] gives the server its own
//! limits), a server could open all of the user's (128 by default), and
//! the user's editor outside would get `EMFILE`. So `inotify_init()` and
//! `inotify_init1()` go to the supervisor, which makes each instance
//! itself and puts it in the caller's table (`SECCOMP_IOCTL_NOTIF_ADDFD`),
//! past a quarter of the user's limit answering `EMFILE`, as the kernel
//! answers past the user's.
//!
//! It counts the instances it made that still live, wherever they are:
//! each is registered in an epoll set of rootfence's own before it is
//! handed over, and the kernel drops it from that set only when the
//! instance is gone (its last descriptor closed, in any process, or in a
//! unix socket's queue). `/proc/self/fdinfo` of the set lists what it
//! holds. Made and counted under one lock, racing callers cannot pass the
//! bound together.
//!
//! # Security
//!
//! Instances are bounded, watches are not (a watch is added on an instance
//! the server holds, by a call the filter lets run: the user's
//! `max_inotify_watches`, usually large, stays shared).

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::{Mutex, OnceLock};

use super::notif::{Answer, last};

/// One count and one instance at a time, whatever supervisor asks (`run`
/// may hold two generations of the server).
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// The instances the server may hold: a quarter of the user's limit, as
/// the server's own user namespace gets where it has one.
pub fn bound() -> u64 {
    (crate::sandbox::resources::user_inotify().0 / 4).max(1)
}

/// The answer to a supervised `inotify_init1(flags)` (`inotify_init()`:
/// flags 0).
pub(super) fn answer(listener: RawFd, n: &libc::seccomp_notif, flags: u64) -> Answer {
    let known = libc::IN_NONBLOCK | libc::IN_CLOEXEC;
    let Ok(flags) = i32::try_from(flags) else {
        return Answer::Done(0, -libc::EINVAL);
    };
    if flags & !known != 0 {
        return Answer::Done(0, -libc::EINVAL);
    }
    let _one = ONE_AT_A_TIME.lock();
    let bound = bound();
    let Some(set) = made() else {
        tracing::warn!(
            "an inotify instance was refused (EMFILE): rootfence cannot count the server's without an epoll set"
        );
        return Answer::Done(0, -libc::EMFILE);
    };
    match alive(set) {
        Ok(held) if held < bound => {}
        Ok(held) => {
            tracing::warn!(
                "the server holds {held} inotify instances, its bound without namespaces (a quarter of the user's {}): one more was refused (EMFILE)",
                crate::sandbox::resources::user_inotify().0
            );
            return Answer::Done(0, -libc::EMFILE);
        }
        Err(e) => {
            tracing::warn!(
                "an inotify instance was refused (EMFILE): rootfence cannot count the server's ({e})"
            );
            return Answer::Done(0, -libc::EMFILE);
        }
    }
    // SAFETY: inotify_init1 with known flags; the result is checked.
    let fd = unsafe { libc::inotify_init1((flags & libc::IN_NONBLOCK) | libc::IN_CLOEXEC) };
    if fd < 0 {
        return Answer::Done(0, -last());
    }
    // SAFETY: a new descriptor we own.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    // Counted from now until the instance is gone (the set holds no
    // reference to it).
    let mut ev = libc::epoll_event { events: 0, u64: 0 };
    // SAFETY: epoll_ctl on descriptors we hold, with an event on the stack.
    if unsafe { libc::epoll_ctl(set.as_raw_fd(), libc::EPOLL_CTL_ADD, fd.as_raw_fd(), &mut ev) } < 0
    {
        return Answer::Done(0, -last());
    }
    let mut add = libc::seccomp_notif_addfd {
        id: n.id,
        flags: libc::SECCOMP_ADDFD_FLAG_SEND as u32,
        srcfd: fd.as_raw_fd() as u32,
        newfd: 0,
        newfd_flags: if flags & libc::IN_CLOEXEC != 0 {
            libc::O_CLOEXEC as u32
        } else {
            0
        },
    };
    // SAFETY: the ioctl reads the struct on the stack; with FLAG_SEND it
    // answers the call with the new descriptor's number.
    let r = unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_ADDFD, &mut add) };
    if r < 0 {
        return Answer::Done(0, -last());
    }
    Answer::Later
}

/// rootfence's epoll set of the instances it made (see the module's
/// documentation); `None` if the kernel gives none.
fn made() -> Option<&'static OwnedFd> {
    static SET: OnceLock<Option<OwnedFd>> = OnceLock::new();
    SET.get_or_init(|| {
        // SAFETY: epoll_create1 with a flag; the result is checked.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        // SAFETY: a new descriptor we own.
        (fd >= 0).then(|| unsafe { OwnedFd::from_raw_fd(fd) })
    })
    .as_ref()
}

/// The instances made that still live: the entries of the set.
fn alive(set: &OwnedFd) -> std::io::Result<u64> {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", set.as_raw_fd()))?;
    Ok(info.lines().filter(|l| l.starts_with("tfd:")).count() as u64)
}
