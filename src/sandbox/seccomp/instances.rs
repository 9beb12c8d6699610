//! The server's inotify instances without namespaces.
//!
//! The kernel counts inotify instances per user: without a user namespace
//! of its own (where [`crate::sandbox::inotify`] gives the server its own
//! limits), a server could open all of the user's (128 by default), and
//! the user's editor outside would get `EMFILE`. So `inotify_init()` and
//! `inotify_init1()` go to the supervisor, which counts the instances the
//! server's processes (rootfence's descendants) hold, and past a quarter
//! of the user's limit answers `EMFILE`, as the kernel answers past the
//! user's. Below it, the supervisor makes the instance itself and puts it
//! in the caller's table (`SECCOMP_IOCTL_NOTIF_ADDFD`): it is there, and
//! counted, before the next call is judged, so callers racing each other
//! cannot pass the bound together.
//!
//! # Security
//!
//! Instances are bounded, watches are not (a watch is added on an instance
//! the server holds, by a call the filter lets run: the user's
//! `max_inotify_watches`, usually large, stays shared). An instance a
//! server passed to another process (`SCM_RIGHTS`, inheritance) is counted
//! in each that holds it: the count errs on the side of the bound. A
//! process of the server whose descriptors rootfence may not read (one
//! that made itself not dumpable) cannot be counted: no new instance is
//! made while one lives.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Mutex;

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
    match held() {
        Ok(held) if held < bound => {}
        Ok(held) => {
            tracing::warn!(
                "the server holds {held} inotify instances, its bound without namespaces (a quarter of the user's {}): one more was refused (EMFILE)",
                crate::sandbox::resources::user_inotify().0
            );
            return Answer::Done(0, -libc::EMFILE);
        }
        Err(pid) => {
            tracing::warn!(
                "an inotify instance was refused (EMFILE): process {pid} of the server made its descriptors unreadable, so its instances cannot be counted"
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

/// The inotify instances rootfence's descendants hold (each descriptor
/// counted), or a process whose descriptors rootfence may not read.
fn held() -> Result<u64, u32> {
    let me = std::process::id();
    let mut parent_of = Vec::new();
    if let Ok(procs) = std::fs::read_dir("/proc") {
        for p in procs.flatten() {
            let Some(pid) = p.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
                continue;
            };
            if let Some(ppid) = ppid(pid) {
                parent_of.push((pid, ppid));
            }
        }
    }
    let mut tree = vec![me];
    let mut i = 0;
    while let Some(&at) = tree.get(i) {
        tree.extend(
            parent_of
                .iter()
                .filter(|&&(_, pp)| pp == at)
                .map(|&(p, _)| p),
        );
        i += 1;
    }
    let mut held = 0;
    for &pid in tree.iter().skip(1) {
        // Through a thread that has not ended: a process whose first
        // thread ended shows no descriptors under its own number.
        let Some(tid) = live_thread(pid) else {
            continue;
        };
        let fds = match std::fs::read_dir(format!("/proc/{pid}/task/{tid}/fd")) {
            Ok(fds) => fds,
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => return Err(pid),
            // Ended since.
            Err(_) => continue,
        };
        for fd in fds.flatten() {
            if std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == "anon_inode:inotify") {
                held += 1;
            }
        }
    }
    Ok(held)
}

/// A thread of process `pid` that has not ended (the process holds one
/// descriptor table, shared by its threads: see [`super::lockwatch`]).
fn live_thread(pid: u32) -> Option<u32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .ok()?
        .flatten()
        .filter_map(|t| t.file_name().to_str().and_then(|s| s.parse::<u32>().ok()))
        .find(|&tid| {
            std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).is_ok_and(|s| {
                s.rsplit_once(')')
                    .and_then(|(_, rest)| rest.trim_start().chars().next())
                    .is_some_and(|c| c != 'Z' && c != 'X')
            })
        })
}

/// The parent of process `pid`.
fn ppid(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command's closing parenthesis: the state, then the parent.
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(1)?.parse().ok()
}
