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
//! Watches too: `inotify_add_watch()` goes to the supervisor, which finds
//! which of its instances the caller names (each is registered under a
//! number of its own, found again with `kcmp(KCMP_EPOLL_TFD)`), adds the
//! watch itself on its copy of the instance, and counts the watches it
//! added per instance that still lives, past a quarter of the user's
//! `max_user_watches` answering `ENOSPC`, as the kernel answers past the
//! user's. A watch removed since (`inotify_rm_watch`, a file deleted) is
//! counted until the bound is met; then the caller's instance is counted
//! again from its `fdinfo`.
//!
//! # Security
//!
//! The supervisor adds a watch on the path the server named (its working
//! directory's for a relative one), as the kernel would have for it:
//! Landlock does not rule on inotify, and the supervisor opens the file
//! first and watches it only where the server's own ids may read it (a
//! rootfence running as root passes over file modes; the server holds no
//! capability that would). The path is read once from the caller's
//! memory. A path in `/proc` is refused (`EACCES`): its links would name
//! rootfence's process, not the server's.

use std::collections::{HashMap, HashSet};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use super::notif::{Answer, hand_over, last, read_string, still_pending, take_fd};

/// One count and one instance or watch at a time, whatever supervisor
/// asks (`run` may hold two generations of the server): the watches added
/// to each instance (by its number), as far as rootfence knows.
static ONE_AT_A_TIME: Mutex<Option<HashMap<u64, HashSet<i32>>>> = Mutex::new(None);

/// The number the next instance is registered under.
static NEXT: AtomicU64 = AtomicU64::new(1);

/// `kcmp()`'s comparison of a descriptor with a file registered in an
/// epoll set.
const KCMP_EPOLL_TFD: libc::c_int = 7;

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
    let mut ev = libc::epoll_event {
        events: 0,
        u64: NEXT.fetch_add(1, Ordering::Relaxed),
    };
    // SAFETY: epoll_ctl on descriptors we hold, with an event on the stack.
    if unsafe { libc::epoll_ctl(set.as_raw_fd(), libc::EPOLL_CTL_ADD, fd.as_raw_fd(), &mut ev) } < 0
    {
        return Answer::Done(0, -last());
    }
    hand_over(listener, n.id, &fd, flags & libc::IN_CLOEXEC != 0)
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
    Ok(entries(set)?.len() as u64)
}

/// The entries of the set: for each instance that lives, the descriptor
/// number it was registered under, its rank among entries of that number,
/// and its own number.
fn entries(set: &OwnedFd) -> std::io::Result<Vec<(i32, u32, u64)>> {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", set.as_raw_fd()))?;
    let mut out: Vec<(i32, u32, u64)> = Vec::new();
    for line in info.lines().filter(|l| l.starts_with("tfd:")) {
        let mut words = line.split_whitespace();
        let field = |words: &mut std::str::SplitWhitespace<'_>, name: &str| {
            words.by_ref().skip_while(|w| *w != name).nth(1).map(str::to_string)
        };
        let tfd = field(&mut words, "tfd:").and_then(|v| v.parse::<i32>().ok());
        let data = field(&mut words, "data:").and_then(|v| u64::from_str_radix(&v, 16).ok());
        if let (Some(tfd), Some(data)) = (tfd, data) {
            let rank = out.iter().filter(|(t, _, _)| *t == tfd).count() as u32;
            out.push((tfd, rank, data));
        }
    }
    Ok(out)
}

/// The watches the server may hold: a quarter of the user's limit, as the
/// server's own user namespace gets where it has one.
pub fn watch_bound() -> u64 {
    (crate::sandbox::resources::user_inotify().1 / 4).max(1)
}

/// The answer to a supervised `inotify_add_watch(fd, path, mask)`.
pub(super) fn add_watch(listener: RawFd, n: &libc::seccomp_notif) -> Answer {
    let args = n.data.args;
    let instance = match take_fd(listener, n.pid, args[0] as RawFd, n.id) {
        Ok(f) => f,
        Err(e) => return Answer::Done(0, -e),
    };
    const PATH_MAX: usize = 4096;
    let Some(path) = read_string(n.pid, args[1], PATH_MAX) else {
        return Answer::Done(0, -libc::EFAULT);
    };
    if let Err(e) = still_pending(listener, n.id) {
        return Answer::Done(0, -e);
    }
    let mask = args[2] as u32;
    // /proc's links name the process that reads them: here rootfence's.
    if path == b"/proc" || path.starts_with(b"/proc/") {
        return Answer::Done(0, -libc::EACCES);
    }
    let file = match readable_by(n.pid, &path, mask) {
        Ok(f) => f,
        Err(e) => return Answer::Done(0, -e),
    };
    let Ok(at) = std::ffi::CString::new(format!("/proc/self/fd/{}", file.as_raw_fd())) else {
        return Answer::Done(0, -libc::EINVAL);
    };
    let mut held = match ONE_AT_A_TIME.lock() {
        Ok(h) => h,
        Err(e) => e.into_inner(),
    };
    let held = held.get_or_insert_with(HashMap::new);
    let Some(set) = made() else {
        return Answer::Done(0, -libc::ENOSPC);
    };
    let Ok(live) = entries(set) else {
        return Answer::Done(0, -libc::ENOSPC);
    };
    // Not one of the instances made here (not an inotify instance): the
    // kernel's answer.
    let Some(id) = instance_of(&instance, set, &live) else {
        return Answer::Done(0, -libc::EINVAL);
    };
    held.retain(|k, _| live.iter().any(|(_, _, d)| d == k));
    let bound = watch_bound();
    let total = |h: &HashMap<u64, HashSet<i32>>| h.values().map(|w| w.len() as u64).sum::<u64>();
    if total(held) >= bound {
        // Watches removed since are counted no more.
        held.insert(id, watches_of(&instance));
        if total(held) >= bound {
            tracing::warn!(
                "the server holds {} inotify watches, its bound without namespaces (a quarter of the user's {}): one more was refused (ENOSPC)",
                total(held),
                crate::sandbox::resources::user_inotify().1
            );
            return Answer::Done(0, -libc::ENOSPC);
        }
    }
    // SAFETY: inotify_add_watch on our copy of the caller's instance, a
    // NUL-terminated path; the result is checked.
    // The file is open: its link in /proc/self/fd is followed to it (a
    // last link of the path the server named was not, with IN_DONT_FOLLOW).
    let wd = unsafe {
        libc::inotify_add_watch(
            instance.as_raw_fd(),
            at.as_ptr(),
            mask & !libc::IN_DONT_FOLLOW,
        )
    };
    if wd < 0 {
        return Answer::Done(0, -last());
    }
    held.entry(id).or_default().insert(wd);
    Answer::Done(i64::from(wd), 0)
}

/// The file `path` names for process `pid` (from its working directory
/// when relative; its last link not followed with `IN_DONT_FOLLOW`),
/// opened `O_PATH` once it is seen that the process may read it, as the
/// kernel requires of a watch: its owner, group or others' read bit for
/// the process's own ids (it holds no capability that would pass over
/// them). `Err` with the errno.
fn readable_by(pid: u32, path: &[u8], mask: u32) -> Result<OwnedFd, i32> {
    let mut at = Vec::new();
    if path.first() != Some(&b'/') {
        at.extend_from_slice(format!("/proc/{pid}/cwd/").as_bytes());
    }
    at.extend_from_slice(path);
    let at = std::ffi::CString::new(at).map_err(|_| libc::EINVAL)?;
    let mut flags = libc::O_PATH | libc::O_CLOEXEC;
    if mask & libc::IN_DONT_FOLLOW != 0 {
        flags |= libc::O_NOFOLLOW;
    }
    // SAFETY: open with a NUL-terminated path; the result is checked.
    let fd = unsafe { libc::open(at.as_ptr(), flags) };
    if fd < 0 {
        return Err(last());
    }
    // SAFETY: a new descriptor we own.
    let file = unsafe { OwnedFd::from_raw_fd(fd) };
    let st = rustix::fs::fstat(&file).map_err(|e| e.raw_os_error())?;
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).map_err(|_| libc::ESRCH)?;
    let ids = |key: &str| -> Vec<u32> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .map(|v| v.split_whitespace().filter_map(|x| x.parse().ok()).collect())
            .unwrap_or_default()
    };
    // Effective (the second of the four), then every group.
    let uid = ids("Uid:").get(1).copied().ok_or(libc::ESRCH)?;
    let mut gids = ids("Gid:").get(1).copied().into_iter().collect::<Vec<_>>();
    gids.extend(ids("Groups:"));
    let mode = st.st_mode;
    let readable = if st.st_uid == uid {
        mode & 0o400 != 0
    } else if gids.contains(&st.st_gid) {
        mode & 0o040 != 0
    } else {
        mode & 0o004 != 0
    };
    if readable { Ok(file) } else { Err(libc::EACCES) }
}

/// The number `instance` (a copy of the caller's descriptor) was
/// registered under, if it is one rootfence made.
fn instance_of(instance: &OwnedFd, set: &OwnedFd, live: &[(i32, u32, u64)]) -> Option<u64> {
    #[repr(C)]
    struct Slot {
        efd: u32,
        tfd: u32,
        toff: u64,
    }
    let me = std::process::id() as libc::pid_t;
    live.iter().find_map(|(tfd, rank, id)| {
        let slot = Slot {
            efd: set.as_raw_fd() as u32,
            tfd: *tfd as u32,
            toff: u64::from(*rank),
        };
        // SAFETY: kcmp compares our own descriptor with an entry of our own
        // epoll set, described by the slot on the stack.
        let same = unsafe {
            libc::syscall(
                libc::SYS_kcmp,
                me,
                me,
                KCMP_EPOLL_TFD,
                instance.as_raw_fd(),
                &raw const slot,
            )
        };
        (same == 0).then_some(*id)
    })
}

/// The watches `instance` holds, from its `fdinfo` (`inotify wd:%x ...`).
fn watches_of(instance: &OwnedFd) -> HashSet<i32> {
    std::fs::read_to_string(format!("/proc/self/fdinfo/{}", instance.as_raw_fd()))
        .map(|info| {
            info.lines()
                .filter_map(|l| l.strip_prefix("inotify wd:"))
                // Printed in hexadecimal.
                .filter_map(|rest| i32::from_str_radix(rest.split_whitespace().next()?, 16).ok())
                .collect()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instance_is_found_again_among_entries_of_one_number() {
        let set = made().expect("an epoll set");
        // Three instances registered under the same number, as when each
        // is handed over and its number taken again by the next.
        let mut kept = Vec::new();
        for _ in 0..3 {
            // SAFETY: inotify_init1 with a flag; the result is checked.
            let fd = unsafe { libc::inotify_init1(libc::IN_CLOEXEC) };
            assert!(fd >= 0);
            // SAFETY: a new descriptor we own.
            let fd = unsafe { OwnedFd::from_raw_fd(fd) };
            let id = NEXT.fetch_add(1, Ordering::Relaxed);
            let mut ev = libc::epoll_event { events: 0, u64: id };
            // SAFETY: as in `answer`.
            let r = unsafe {
                libc::epoll_ctl(set.as_raw_fd(), libc::EPOLL_CTL_ADD, fd.as_raw_fd(), &mut ev)
            };
            assert_eq!(r, 0);
            // Its number moves on: a copy elsewhere, the first closed.
            let copy = fd.try_clone().unwrap();
            drop(fd);
            kept.push((id, copy));
        }
        let live = entries(set).unwrap();
        for (id, copy) in &kept {
            assert_eq!(instance_of(copy, set, &live), Some(*id));
        }
        // A watch of one of them, counted from its fdinfo (hexadecimal).
        let dir = tempfile::tempdir().unwrap();
        let (_, copy) = &kept[1];
        for i in 0..20 {
            let p = dir.path().join(format!("f{i}"));
            std::fs::write(&p, "").unwrap();
            let c = std::ffi::CString::new(p.as_os_str().as_encoded_bytes()).unwrap();
            // SAFETY: a NUL-terminated path on an instance we hold.
            assert!(unsafe { libc::inotify_add_watch(copy.as_raw_fd(), c.as_ptr(), 2) } > 0);
        }
        assert_eq!(watches_of(copy), (1..=20).collect());
        // Not an instance of the set.
        let other = std::fs::File::open("/dev/null").unwrap();
        assert_eq!(instance_of(&other.into(), set, &live), None);
    }
}
