//! Locks: `flock()` and `fcntl()`'s record locks, judged by the file's
//! open mode.
//!
//! A lock needs no write access: an exclusive `flock()` on a file the
//! server may only read (cargo's `~/.cargo/.package-cache`, a read-granted
//! database) makes the user's own programs wait outside. Landlock does not
//! rule on locks. The filter hands every `flock()` but an unlock, and every
//! `F_SETLK`/`F_SETLKW`/`F_OFD_SETLK`/`F_OFD_SETLKW`, to the supervisor,
//! which takes a copy of the descriptor and reads its open mode:
//!
//! - **opened only for reading** (the only way into a read grant): the
//!   call succeeds and locks nothing. The lock is the server's alone;
//!   nothing outside waits for it. (A write lock on such a descriptor is
//!   `EBADF`, as the kernel answers.)
//! - **opened for writing** (a root, its store, its scratch: where it may
//!   write): a real lock. `flock()` and open-file-description locks belong
//!   to the open file, so the supervisor takes them itself, on its copy:
//!   the server cannot swap the descriptor between the check and the lock.
//!   A wait (`LOCK_EX` without `LOCK_NB`, `F_OFD_SETLKW`) is retried on a
//!   thread of its own until the lock is had or the caller gives up, at
//!   most [`MAX_WAITS`] at once (then `ENOLCK`).
//! - POSIX record locks belong to the process, which the supervisor cannot
//!   take them for: on a descriptor opened for writing the kernel runs the
//!   call, and a process of several threads is watched from then on (see
//!   [`super::lockwatch`]).
//! - **a device** (`/dev/null`, a terminal: writable by everyone, and the
//!   same device outside): as a file opened only for reading, whatever the
//!   open mode.
//! - a file opened only for reading **that the server may write** (on a
//!   mount of its view that is not read-only; without the view, under a
//!   write grant): as one opened for writing. flock(1) opens its file only
//!   for reading, a directory can be opened no other way, and a read-only
//!   sqlite connection takes its shared lock so: their locks must keep
//!   the server's own processes from each other.
//!
//! # Security
//!
//! What is locked for real is only what the descriptor the supervisor
//! checked names, with two exceptions kept narrow: a POSIX lock, run by the
//! kernel on the descriptor number after the check (a second thread could
//! put another descriptor under that number in between: such a lock is
//! found and its process killed, within a bounded window, by
//! [`super::lockwatch`]), and, where the kernel refuses rootfence a copy
//! of the descriptor or a read of the caller's memory (a container's own
//! seccomp profile), every lock on a descriptor `/proc` shows opened for
//! writing.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use super::notif::{Answer, last, send, still_pending, take_fd};
use super::writable::{Writable, fd_flags, is_device};

/// `fcntl` commands that take or release a record lock.
pub const SETLK: u32 = libc::F_SETLK as u32;
/// See [`SETLK`].
pub const SETLKW: u32 = libc::F_SETLKW as u32;
/// See [`SETLK`].
pub const OFD_SETLK: u32 = libc::F_OFD_SETLK as u32;
/// See [`SETLK`].
pub const OFD_SETLKW: u32 = libc::F_OFD_SETLKW as u32;

/// Locks waited for at once; one more is answered `ENOLCK`.
pub const MAX_WAITS: usize = 64;

/// How often a wait tries again.
const RETRY: Duration = Duration::from_millis(10);

/// Waits in progress.
static WAITS: AtomicUsize = AtomicUsize::new(0);

/// The lock a call asks for.
#[derive(Debug, Clone, Copy)]
enum Ask {
    /// `flock(fd, op)`.
    Flock(i32),
    /// `fcntl(fd, F_OFD_SETLK[W], lock)`.
    Ofd { wait: bool, lock: libc::flock },
    /// `fcntl(fd, F_SETLK[W], lock)`.
    Posix { write: bool },
}

/// The answer to a supervised `flock()` or `fcntl()` lock (see the
/// module's documentation).
pub(super) fn answer(listener: &Arc<OwnedFd>, n: &libc::seccomp_notif, own: &Writable) -> Answer {
    let raw = listener.as_raw_fd();
    let target = n.data.args[0] as RawFd;
    let ask = if i64::from(n.data.nr) == libc::SYS_flock {
        Ask::Flock(n.data.args[1] as i32)
    } else {
        let cmd = n.data.args[1] as u32;
        let lock = match read_lock(n.pid, n.data.args[2]) {
            Ok(l) => l,
            // rootfence may not read the caller's memory here.
            Err(libc::EPERM | libc::ENOSYS) => return by_proc(n.pid, target, own),
            Err(e) => return Answer::Done(0, -e),
        };
        if let Err(e) = still_pending(raw, n.id) {
            return Answer::Done(0, -e);
        }
        if cmd == OFD_SETLK || cmd == OFD_SETLKW {
            Ask::Ofd {
                wait: cmd == OFD_SETLKW,
                lock,
            }
        } else {
            Ask::Posix {
                write: i32::from(lock.l_type) == libc::F_WRLCK,
            }
        }
    };
    // A POSIX lock is run by the kernel after the check: its process's
    // threads are counted before the descriptor is looked at (a thread
    // that puts another file under the number and ends must count).
    let caller = match ask {
        Ask::Posix { .. } => match super::lockwatch::Caller::of(n.pid) {
            Some(c) => Some(c),
            None => return Answer::Done(0, -libc::ESRCH),
        },
        _ => None,
    };
    let file = match take_fd(raw, n.pid, target, n.id) {
        Ok(f) => f,
        Err(libc::EBADF) => return Answer::Done(0, -libc::EBADF),
        // The kernel refuses rootfence a copy (pidfd_getfd) here.
        Err(_) => return by_proc(n.pid, target, own),
    };
    let flags = match fd_flags(&file) {
        Ok(f) => f,
        Err(e) => return Answer::Done(0, -e),
    };
    if flags & libc::O_PATH != 0 {
        return Answer::Done(0, -libc::EBADF);
    }
    let read_only = flags & libc::O_ACCMODE == libc::O_RDONLY;
    if read_only {
        match ask {
            Ask::Ofd { lock, .. } if i32::from(lock.l_type) == libc::F_WRLCK => {
                return Answer::Done(0, -libc::EBADF);
            }
            Ask::Posix { write: true } => return Answer::Done(0, -libc::EBADF),
            _ => {}
        }
    }
    // A device (/dev/null, a terminal) is the same outside: what the
    // server may write there is no file of its own to lock.
    if is_device(&file) || (read_only && !own.holds(&file)) {
        return Answer::Done(0, 0);
    }
    match ask {
        Ask::Posix { .. } => match &caller {
            Some(caller) => let_through(caller, target, own),
            None => Answer::Done(0, -libc::ESRCH),
        },
        Ask::Flock(op) => {
            let wait = op & libc::LOCK_NB == 0;
            lock_now_or_wait(listener, n.id, file, wait, move |f| {
                // SAFETY: flock on a descriptor we hold.
                errno_of(unsafe { libc::flock(f.as_raw_fd(), op | libc::LOCK_NB) })
            })
        }
        Ask::Ofd { wait, lock } => lock_now_or_wait(listener, n.id, file, wait, move |f| {
            // SAFETY: fcntl on a descriptor we hold, with our own copy of
            // the caller's struct.
            errno_of(unsafe { libc::fcntl(f.as_raw_fd(), libc::F_OFD_SETLK, &lock) })
        }),
    }
}

/// Take the lock now; if it is held elsewhere and the caller waits, on a
/// thread of its own until it is had or the caller is gone.
fn lock_now_or_wait(
    listener: &Arc<OwnedFd>,
    id: u64,
    file: OwnedFd,
    wait: bool,
    take: impl Fn(&OwnedFd) -> Result<(), i32> + Send + 'static,
) -> Answer {
    match take(&file) {
        Ok(()) => return Answer::Done(0, 0),
        Err(e) if !wait || !busy(e) => return Answer::Done(0, -e),
        Err(_) => {}
    }
    if WAITS.fetch_add(1, Ordering::AcqRel) >= MAX_WAITS {
        WAITS.fetch_sub(1, Ordering::AcqRel);
        return Answer::Done(0, -libc::ENOLCK);
    }
    let listener = listener.clone();
    let spawned = std::thread::Builder::new()
        .name("rootfence-lock".into())
        .spawn(move || {
            loop {
                std::thread::sleep(RETRY);
                // The caller gave up (a signal, its end): so do we.
                if still_pending(listener.as_raw_fd(), id).is_err() {
                    break;
                }
                match take(&file) {
                    Err(e) if busy(e) => continue,
                    Ok(()) => send(listener.as_raw_fd(), id, Answer::Done(0, 0)),
                    Err(e) => send(listener.as_raw_fd(), id, Answer::Done(0, -e)),
                }
                break;
            }
            WAITS.fetch_sub(1, Ordering::AcqRel);
        });
    match spawned {
        Ok(_) => Answer::Later,
        Err(_) => {
            WAITS.fetch_sub(1, Ordering::AcqRel);
            Answer::Done(0, -libc::ENOLCK)
        }
    }
}

/// Where rootfence can neither copy the descriptor nor read the caller's
/// memory: the open mode `/proc` shows. Opened only for reading: nothing is
/// locked; else the kernel runs the call.
fn by_proc(pid: u32, fd: RawFd, own: &Writable) -> Answer {
    // Counted before the descriptor is looked at (see `answer`).
    let Some(caller) = super::lockwatch::Caller::of(pid) else {
        return Answer::Done(0, -libc::ESRCH);
    };
    let info = std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{fd}"));
    let flags = info.ok().and_then(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("flags:"))
            .and_then(|v| i32::from_str_radix(v.trim(), 8).ok())
    });
    match flags {
        None => Answer::Done(0, -libc::EBADF),
        Some(f) if f & libc::O_ACCMODE == libc::O_RDONLY => Answer::Done(0, 0),
        Some(_) => let_through(&caller, fd, own),
    }
}

/// The kernel runs the call (a POSIX lock, or any lock judged by `/proc`),
/// with the caller's process watched if it has more threads than the one
/// waiting here.
fn let_through(caller: &super::lockwatch::Caller, fd: RawFd, own: &Writable) -> Answer {
    match super::lockwatch::letting_through(caller, fd, own) {
        Ok(()) => Answer::Continue,
        Err(e) => Answer::Done(0, -e),
    }
}

/// The caller's `struct flock`, read once.
fn read_lock(pid: u32, ptr: u64) -> Result<libc::flock, i32> {
    let mut bytes = [0u8; std::mem::size_of::<libc::flock>()];
    if super::notif::read_memory(pid, ptr, &mut bytes)? != bytes.len() {
        return Err(libc::EFAULT);
    }
    // SAFETY: `struct flock` is plain data, every byte of it read above.
    Ok(unsafe { std::ptr::read_unaligned(bytes.as_ptr().cast()) })
}

fn errno_of(r: libc::c_int) -> Result<(), i32> {
    if r < 0 { Err(last()) } else { Ok(()) }
}

/// Held by another: worth waiting for.
fn busy(e: i32) -> bool {
    e == libc::EAGAIN || e == libc::EWOULDBLOCK || e == libc::EACCES
}
