//! The server's own inotify limits.
//!
//! The kernel counts inotify instances and watches per user *and user
//! namespace*, and charges a namespace's count against every namespace
//! above it too (`ucounts`). A server whose user namespace has its own
//! `max_inotify_instances` and `max_inotify_watches` (written through
//! `/proc/sys/user`, which shows the writer's namespace's) can take no more
//! of the user's than those, whatever it opens; the rest stays the user's.
//!
//! - As a user, the server runs in its own user namespace: the init writes
//!   the limits while it builds the view ([`write_limits`], before
//!   `/proc/sys` is masked).
//! - As root, the server has no user namespace of its own (the view is
//!   built with root's rights), so one is made for it as its first step
//!   after the init starts it ([`enter_user_namespace`]):
//!   `unshare(CLONE_NEWUSER)`, its own uid and gid mapped to themselves
//!   (one id each, setgroups denied: the maps a process may write for
//!   itself), then the limits. Those go through a clone of the view's
//!   fresh `/proc` that the init takes ([`take_proc`]) before the view is
//!   made read-only and `/proc/sys` masked: the clone is in no mount tree,
//!   and is closed before the server runs. Where the kernel refuses the
//!   user namespace (`user.max_user_namespaces = 0`, a filter around
//!   rootfence), the server runs without it, and `doctor`, whose probe
//!   tries the same steps, says inotify is not bounded.

use std::cell::Cell;
use std::ffi::{CStr, CString};
use std::os::fd::RawFd;

use super::protocol::{Step, errno, fail};

/// The server's inotify limits, as the child writes them.
#[derive(Debug)]
pub struct InotifySetup {
    /// `max_inotify_instances`, as text.
    pub instances: CString,
    /// `max_inotify_watches`, as text.
    pub watches: CString,
    /// rootfence is root: the server gets a user namespace made for it,
    /// with these `uid_map` and `gid_map` lines.
    pub new_user_namespace: Option<IdMapLines>,
    /// The clone of the view's `/proc` (root), taken by the init while
    /// it builds the view; -1 until then.
    pub proc: Cell<RawFd>,
}

/// The `uid_map` and `gid_map` lines of a user namespace made for the
/// server: its own ids, mapped to themselves.
#[derive(Debug)]
pub struct IdMapLines {
    /// `UID UID 1`.
    pub uid: CString,
    /// `GID GID 1`.
    pub gid: CString,
}

impl IdMapLines {
    /// This process's effective ids, one each.
    pub fn own() -> IdMapLines {
        // SAFETY: geteuid and getegid cannot fail.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        let line = |id: u32| CString::new(format!("{id} {id} 1")).unwrap_or_default();
        IdMapLines {
            uid: line(uid),
            gid: line(gid),
        }
    }
}

/// `open_tree` flags.
const OPEN_TREE_CLONE: u32 = 1;

/// Write `value` to `path` below the directory `dir` (or, with
/// `AT_FDCWD`, an absolute `path`); 0 or the errno.
///
/// # Safety
///
/// Async-signal-safe: raw system calls on the C strings and our own
/// descriptor.
pub(super) unsafe fn write_at(dir: RawFd, path: &CStr, value: &CStr) -> i32 {
    // SAFETY (whole body): raw system calls on the C strings and our own
    // descriptor.
    unsafe {
        let fd = libc::openat(dir, path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        if fd < 0 {
            return errno();
        }
        let len = value.to_bytes().len();
        let r = if libc::write(fd, value.as_ptr().cast(), len) == len as isize {
            0
        } else {
            errno()
        };
        libc::close(fd);
        r
    }
}

/// As a user: write the limits of the init's own user namespace through
/// the view's fresh `/proc`.
///
/// # Safety
///
/// In the init only, its `/proc` the view's, before `/proc/sys` is
/// masked. Async-signal-safe.
pub(super) unsafe fn write_limits(err: RawFd, s: &InotifySetup) {
    let writes = [
        (
            c"/proc/sys/user/max_inotify_instances",
            s.instances.as_c_str(),
        ),
        (c"/proc/sys/user/max_inotify_watches", s.watches.as_c_str()),
    ];
    for (i, (path, value)) in writes.into_iter().enumerate() {
        // SAFETY: as this function's contract.
        let e = unsafe { write_at(libc::AT_FDCWD, path, value) };
        if e != 0 {
            // SAFETY: reporting from the child.
            unsafe { fail(err, Step::Inotify, i as u32, e) }
        }
    }
}

/// As root: keep a clone of the view's fresh `/proc` (in no mount tree,
/// so neither made read-only with the view nor masked) for the server's
/// [`enter_user_namespace`].
///
/// # Safety
///
/// In the init only, once the view's `/proc` is mounted, before the view
/// is made read-only. Async-signal-safe.
pub(super) unsafe fn take_proc(err: RawFd, s: &InotifySetup) {
    // SAFETY: open_tree on a static C string.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            c"/proc".as_ptr(),
            OPEN_TREE_CLONE | libc::O_CLOEXEC as u32,
        )
    };
    if fd < 0 {
        // SAFETY: reporting from the child.
        unsafe { fail(err, Step::Inotify, 10, errno()) }
    }
    s.proc.set(fd as RawFd);
}

/// What [`enter`] came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Entered {
    /// The kernel refused the user namespace: nothing changed.
    Refused,
    /// In a user namespace of its own, with its limits.
    Done,
    /// In a user namespace, but write `.0` failed with errno `.1`.
    Failed(u32, i32),
}

/// Make a user namespace for the calling process, map its ids, and give
/// the namespace `limits` (instances, watches), through the `/proc`
/// descriptor `proc` (whose `self` is the caller).
///
/// # Safety
///
/// In a single-threaded child only. Async-signal-safe.
pub(super) unsafe fn enter(proc: RawFd, maps: &IdMapLines, limits: (&CStr, &CStr)) -> Entered {
    // SAFETY: unshare with an integer argument.
    if unsafe { libc::unshare(libc::CLONE_NEWUSER) } < 0 {
        return Entered::Refused;
    }
    let writes = [
        (c"self/setgroups", c"deny"),
        (c"self/uid_map", maps.uid.as_c_str()),
        (c"self/gid_map", maps.gid.as_c_str()),
        (c"sys/user/max_inotify_instances", limits.0),
        (c"sys/user/max_inotify_watches", limits.1),
    ];
    for (i, (path, value)) in writes.into_iter().enumerate() {
        // SAFETY: as this function's contract.
        let e = unsafe { write_at(proc, path, value) };
        if e != 0 {
            return Entered::Failed(i as u32, e);
        }
    }
    Entered::Done
}

/// As root: the server's first step, a user namespace of its own with its
/// inotify limits (see the module's documentation); the `/proc` clone is
/// closed either way.
///
/// # Safety
///
/// In the server only (started by the init, sharing its memory until
/// `execve`), before any other confinement. Async-signal-safe.
pub(super) unsafe fn enter_user_namespace(err: RawFd, s: &InotifySetup) {
    let Some(maps) = &s.new_user_namespace else {
        return;
    };
    let proc = s.proc.get();
    if proc < 0 {
        return;
    }
    // SAFETY: as this function's contract.
    let entered = unsafe { enter(proc, maps, (&s.instances, &s.watches)) };
    // SAFETY: closing the clone, which is ours.
    unsafe { libc::close(proc) };
    if let Entered::Failed(i, e) = entered {
        // In a user namespace whose maps may be missing: nothing is run.
        // SAFETY: reporting from the child.
        unsafe { fail(err, Step::Inotify, i, e) }
    }
}
