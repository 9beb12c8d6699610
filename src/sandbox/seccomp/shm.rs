//! The server's own `/dev/shm` without namespaces.
//!
//! POSIX shared memory and named semaphores (`shm_open`, `sem_open`:
//! Python's `multiprocessing`, its `shared_memory`) are files that glibc
//! and musl name `/dev/shm/NAME`. With namespaces the view mounts a
//! directory of the server's scratch space there. Without them there is no
//! mount to make, and the host's `/dev/shm`, shared by every process of the
//! machine, is not granted. So the calls that open, link, rename or remove
//! a name go to the supervisor, which does them for a path of the form
//! `/dev/shm/NAME` in a directory of rootfence's own ([`Shm`]) and hands
//! an opened file over (`SECCOMP_IOCTL_NOTIF_ADDFD`); every other path
//! goes on to the kernel.
//!
//! # Security
//!
//! - Only a path read as exactly `/dev/shm/NAME` (NAME one component, not
//!   `.` or `..`, at most 255 bytes) is done here; any other spelling
//!   (`/dev//shm/x`, `/dev/shm/../x`, a relative path) goes on to the
//!   kernel, where Landlock refuses the host's `/dev/shm`. The supervisor
//!   acts on its own copy of the path: a thread changing it afterwards
//!   changes nothing.
//! - Every operation is relative to the directory's handle, on one
//!   component, without following a link: what it reaches is an entry of
//!   that directory.
//! - The server has no Landlock rule for the directory (it may learn its
//!   place, from `/proc/self/fd`, and still neither write, link into nor
//!   run from it), so the only files there are those the supervisor made
//!   there: a link it makes joins two of them, and one with an end outside
//!   is refused (`EXDEV`). And it opens only a file it made there (by
//!   device and inode, looked at before the file is opened): were the
//!   directory reachable after all (a grant of a place above it), a hard
//!   link to a file the server may only read is never opened here with
//!   rootfence's rights. A file is forgotten once its last name is gone
//!   (its inode may come again), and only regular files are opened.

use std::collections::HashSet;
use std::ffi::CString;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Mutex;

use super::notif::{Answer, hand_over, last, read_string, still_pending};

/// Where glibc and musl put POSIX shared memory and semaphores.
const PREFIX: &[u8] = b"/dev/shm/";

/// The longest name a directory entry takes.
const NAME_MAX: usize = 255;

/// The open flags done here; a call with any other (`O_PATH`,
/// `O_TMPFILE`, `O_DIRECTORY`) goes on to the kernel.
const OPEN_FLAGS: i32 = libc::O_ACCMODE
    | libc::O_CREAT
    | libc::O_EXCL
    | libc::O_TRUNC
    | libc::O_APPEND
    | libc::O_NONBLOCK
    | libc::O_NOCTTY
    | libc::O_NOFOLLOW
    | libc::O_CLOEXEC
    | libc::O_LARGEFILE
    | libc::O_DSYNC
    | libc::O_SYNC
    | libc::O_NOATIME;

/// The server's `/dev/shm`: an open directory of rootfence's own that the
/// server has no rule for.
#[derive(Debug)]
pub struct Shm {
    dir: OwnedFd,
    /// The files rootfence made there (device and inode), the only ones it
    /// opens.
    made: Mutex<HashSet<(u64, u64)>>,
}

impl Shm {
    /// The directory `dir` (opened by rootfence, `O_DIRECTORY`, empty).
    pub fn new(dir: OwnedFd) -> Shm {
        Shm {
            dir,
            made: Mutex::new(HashSet::new()),
        }
    }

    /// The file `name` names, when that is its last name.
    fn last_link(&self, name: &CString) -> Option<(u64, u64)> {
        let st = rustix::fs::statat(&self.dir, name.as_c_str(), rustix::fs::AtFlags::SYMLINK_NOFOLLOW).ok()?;
        (st.st_nlink == 1).then_some((st.st_dev, st.st_ino))
    }

    /// Forget the file `gone` once the call that removed its last name
    /// (returning `r`) has: its inode may come again for another file.
    fn forget_if(&self, r: libc::c_int, gone: Option<(u64, u64)>) {
        if r == 0
            && let Some(id) = gone
            && let Ok(mut made) = self.made.lock()
        {
            made.remove(&id);
        }
    }
}

/// What a call does with `/dev/shm` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Call {
    /// `openat(dirfd, path, flags, mode)`: the argument positions.
    Open { path: u8, flags: Option<u8>, mode: u8 },
    /// `unlinkat(dirfd, path, flags)`.
    Unlink { path: u8, flags: Option<u8> },
    /// `linkat` / `renameat2`: a second name; `flags` is checked.
    Two {
        from: u8,
        to: u8,
        flags: Option<u8>,
        rename: bool,
    },
}

/// The call `nr`, if it is one the supervisor does for `/dev/shm`.
fn call(nr: i64) -> Option<Call> {
    let c = match nr {
        libc::SYS_openat => Call::Open {
            path: 1,
            flags: Some(2),
            mode: 3,
        },
        libc::SYS_unlinkat => Call::Unlink {
            path: 1,
            flags: Some(2),
        },
        libc::SYS_linkat => Call::Two {
            from: 1,
            to: 3,
            flags: Some(4),
            rename: false,
        },
        libc::SYS_renameat => Call::Two {
            from: 1,
            to: 3,
            flags: None,
            rename: true,
        },
        libc::SYS_renameat2 => Call::Two {
            from: 1,
            to: 3,
            flags: Some(4),
            rename: true,
        },
        _ => return of_arch(nr),
    };
    Some(c)
}

/// x86_64's older names of the calls above.
#[cfg(target_arch = "x86_64")]
fn of_arch(nr: i64) -> Option<Call> {
    let c = match nr {
        libc::SYS_open => Call::Open {
            path: 0,
            flags: Some(1),
            mode: 2,
        },
        // creat(path, mode) is open(path, O_CREAT | O_WRONLY | O_TRUNC, mode).
        libc::SYS_creat => Call::Open {
            path: 0,
            flags: None,
            mode: 1,
        },
        libc::SYS_unlink => Call::Unlink {
            path: 0,
            flags: None,
        },
        libc::SYS_link => Call::Two {
            from: 0,
            to: 1,
            flags: None,
            rename: false,
        },
        libc::SYS_rename => Call::Two {
            from: 0,
            to: 1,
            flags: None,
            rename: true,
        },
        _ => return None,
    };
    Some(c)
}

#[cfg(not(target_arch = "x86_64"))]
fn of_arch(_nr: i64) -> Option<Call> {
    None
}

/// Whether call `nr` is one the supervisor does for a `/dev/shm` name.
pub fn claims(nr: i64) -> bool {
    call(nr).is_some()
}

/// Whether the filter hands every call `nr` to the supervisor for
/// `/dev/shm` (`open` and `openat` only where their flags may name a
/// semaphore or shared memory: see the filter's table).
pub fn claims_every(nr: i64) -> bool {
    call(nr).is_some_and(|c| !matches!(c, Call::Open { flags: Some(_), .. }))
}

/// The NAME of a path read as exactly `/dev/shm/NAME`.
fn name_of(path: &[u8]) -> Option<&[u8]> {
    let name = path.strip_prefix(PREFIX)?;
    (!name.is_empty()
        && name.len() <= NAME_MAX
        && name != b"."
        && name != b".."
        && !name.contains(&b'/'))
    .then_some(name)
}

/// The `/dev/shm` name argument `i` of notification `n` names, read once:
/// `None` for any other path (or one that cannot be read: the kernel says
/// why).
fn arg_name(n: &libc::seccomp_notif, i: u8) -> Option<CString> {
    let raw = read_string(n.pid, n.data.args[usize::from(i)], PREFIX.len() + NAME_MAX + 1)?;
    CString::new(name_of(&raw)?).ok()
}

/// The answer to notification `n` if it is a call on a `/dev/shm` name,
/// done in `shm`; `None` to let it go on as it would.
pub(super) fn answer(listener: RawFd, n: &libc::seccomp_notif, shm: &Shm) -> Option<Answer> {
    let args = n.data.args;
    let arg = |i: Option<u8>| i.map_or(0, |i| args[usize::from(i)]);
    let answer = match call(i64::from(n.data.nr))? {
        Call::Open { path, flags, mode } => {
            let name = arg_name(n, path)?;
            let flags = match flags {
                Some(i) => i32::try_from(args[usize::from(i)] & 0xffff_ffff).ok()?,
                None => libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC,
            };
            if flags & !OPEN_FLAGS != 0 {
                return None;
            }
            still_pending(listener, n.id).ok()?;
            open(listener, n, shm, &name, flags, args[usize::from(mode)] as u32)
        }
        Call::Unlink { path, flags } => {
            let name = arg_name(n, path)?;
            let flags = arg(flags) as i32;
            if flags & !libc::AT_REMOVEDIR != 0 {
                return None;
            }
            still_pending(listener, n.id).ok()?;
            let last = shm.last_link(&name);
            // SAFETY: unlinkat on our directory, a NUL-terminated name.
            let r = unsafe { libc::unlinkat(shm.dir.as_raw_fd(), name.as_ptr(), flags) };
            shm.forget_if(r, last);
            done(r)
        }
        Call::Two {
            from,
            to,
            flags,
            rename,
        } => {
            let flags = arg(flags) as u32;
            // linkat's AT_EMPTY_PATH names a descriptor, not a path.
            if !rename && flags & libc::AT_EMPTY_PATH as u32 != 0 {
                return None;
            }
            let (a, b) = match (arg_name(n, from), arg_name(n, to)) {
                (None, None) => return None,
                (Some(a), Some(b)) => (a, b),
                // One end in the server's /dev/shm, the other not: as
                // between two filesystems.
                _ => {
                    still_pending(listener, n.id).ok()?;
                    return Some(Answer::Done(0, -libc::EXDEV));
                }
            };
            still_pending(listener, n.id).ok()?;
            let d = shm.dir.as_raw_fd();
            // A rename that replaces a file's last name ends it.
            let replaced = if rename && flags & libc::RENAME_EXCHANGE == 0 {
                shm.last_link(&b)
            } else {
                None
            };
            // SAFETY: linkat / renameat2 on our directory, NUL-terminated
            // names; no entry here is a link to follow (AT_SYMLINK_FOLLOW
            // changes nothing), a rename's flags the kernel checks.
            let r = unsafe {
                if rename {
                    libc::renameat2(d, a.as_ptr(), d, b.as_ptr(), flags)
                } else {
                    libc::linkat(d, a.as_ptr(), d, b.as_ptr(), 0)
                }
            };
            shm.forget_if(r, replaced);
            done(r)
        }
    };
    Some(answer)
}

/// The answer to a call that returned `r`.
fn done(r: libc::c_int) -> Answer {
    if r < 0 {
        Answer::Done(0, -last())
    } else {
        Answer::Done(0, 0)
    }
}

/// Open `name` in `shm` as `flags` and `mode` say, and put it in the
/// caller's table as the call's result.
fn open(
    listener: RawFd,
    n: &libc::seccomp_notif,
    shm: &Shm,
    name: &CString,
    flags: i32,
    mode: u32,
) -> Answer {
    let file = match made_or_found(shm, name, flags, mode) {
        Ok(f) => f,
        Err(e) => return Answer::Done(0, -e),
    };
    hand_over(listener, n.id, &file, flags & libc::O_CLOEXEC != 0)
}

/// `name` in `shm`, opened as `flags` say: made now (`O_CREAT`, and no
/// entry of the name), or one rootfence made before; `Err` with the errno.
///
/// # Security
///
/// A file is opened only if rootfence made it here: a file of another
/// origin under the name (were the directory reachable by the server
/// after all, through a grant of a place above it) is refused (`EACCES`)
/// before anything (`O_TRUNC`) touches it.
fn made_or_found(shm: &Shm, name: &CString, flags: i32, mode: u32) -> Result<OwnedFd, i32> {
    let d = shm.dir.as_raw_fd();
    let wanted = flags & !(libc::O_CREAT | libc::O_EXCL) | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    if flags & libc::O_CREAT != 0 {
        // Never a set-id or sticky bit (as the filter refuses them at
        // creation).
        let mode = mode & 0o777;
        // SAFETY: openat on our directory, a NUL-terminated name; the
        // result is checked.
        let fd = unsafe { libc::openat(d, name.as_ptr(), wanted | libc::O_CREAT | libc::O_EXCL, mode) };
        if fd >= 0 {
            // SAFETY: a new descriptor we own.
            let file = unsafe { OwnedFd::from_raw_fd(fd) };
            let id = identity(&file)?;
            if let Ok(mut made) = shm.made.lock() {
                made.insert(id);
            }
            return Ok(file);
        }
        let e = last();
        if e != libc::EEXIST || flags & libc::O_EXCL != 0 {
            return Err(e);
        }
    }
    // SAFETY: as above, O_PATH: nothing of the file is opened.
    let fd = unsafe { libc::openat(d, name.as_ptr(), libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(last());
    }
    // SAFETY: a new descriptor we own.
    let found = unsafe { OwnedFd::from_raw_fd(fd) };
    let st = rustix::fs::fstat(&found).map_err(|e| e.raw_os_error())?;
    let id = (st.st_dev, st.st_ino);
    let regular = st.st_mode & libc::S_IFMT == libc::S_IFREG;
    if !regular || !shm.made.lock().is_ok_and(|m| m.contains(&id)) {
        return Err(libc::EACCES);
    }
    // The very file looked at, opened as asked.
    let again = CString::new(format!("/proc/self/fd/{}", found.as_raw_fd()))
        .map_err(|_| libc::EINVAL)?;
    // SAFETY: open of our own descriptor's link, a NUL-terminated path; the
    // result is checked.
    let fd = unsafe { libc::open(again.as_ptr(), (wanted & !libc::O_NOFOLLOW) | libc::O_CLOEXEC) };
    if fd < 0 {
        return Err(last());
    }
    // SAFETY: a new descriptor we own.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// A file's device and inode.
fn identity(f: &OwnedFd) -> Result<(u64, u64), i32> {
    let st = rustix::fs::fstat(f).map_err(|e| e.raw_os_error())?;
    Ok((st.st_dev, st.st_ino))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_name_directly_in_dev_shm_is_the_servers() {
        assert_eq!(name_of(b"/dev/shm/sem.mp-1"), Some(&b"sem.mp-1"[..]));
        assert_eq!(name_of(b"/dev/shm/psm_abc"), Some(&b"psm_abc"[..]));
        for other in [
            "/dev/shm/",
            "/dev/shm",
            "/dev/shm/.",
            "/dev/shm/..",
            "/dev/shm/../x",
            "/dev/shm/a/b",
            "/dev/shm/a/",
            "/dev//shm/x",
            "/dev/./shm/x",
            "dev/shm/x",
            "/run/shm/x",
            "x",
        ] {
            assert_eq!(name_of(other.as_bytes()), None, "{other}");
        }
        let long = [b"/dev/shm/".as_slice(), &[b'a'; 256]].concat();
        assert_eq!(name_of(&long), None);
        assert!(name_of(&long[..long.len() - 1]).is_some());
    }

    fn c(s: &str) -> CString {
        CString::new(s).unwrap()
    }

    #[test]
    fn only_files_rootfence_made_there_are_opened() {
        let t = tempfile::tempdir().unwrap();
        let dir = std::fs::File::open(t.path()).unwrap();
        let shm = Shm::new(dir.into());
        let rw = libc::O_RDWR | libc::O_CLOEXEC;
        // A file planted under a name, a link to a file outside: never
        // opened, never truncated.
        std::fs::write(t.path().join("planted"), "keep").unwrap();
        let outside = t.path().join("../rootfence-shm-test-outside");
        std::fs::write(&outside, "keep").unwrap();
        std::os::unix::fs::symlink(&outside, t.path().join("link")).unwrap();
        for name in ["planted", "link"] {
            for flags in [rw, rw | libc::O_TRUNC, rw | libc::O_CREAT | libc::O_TRUNC] {
                let got = made_or_found(&shm, &c(name), flags, 0o600).map(drop);
                assert_eq!(got, Err(libc::EACCES), "{name} {flags:#x}");
            }
        }
        assert_eq!(std::fs::read_to_string(t.path().join("planted")).unwrap(), "keep");
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), "keep");
        std::fs::remove_file(&outside).unwrap();
        // Its own: made, opened again, under a second name, refused when
        // it must be new.
        let creat = rw | libc::O_CREAT;
        made_or_found(&shm, &c("own"), creat | libc::O_EXCL, 0o4777).unwrap();
        let mode = std::fs::metadata(t.path().join("own")).unwrap().permissions();
        assert_eq!(std::os::unix::fs::PermissionsExt::mode(&mode) & 0o7000, 0);
        made_or_found(&shm, &c("own"), rw, 0).unwrap();
        made_or_found(&shm, &c("own"), creat, 0o600).unwrap();
        assert_eq!(
            made_or_found(&shm, &c("own"), creat | libc::O_EXCL, 0o600).map(drop),
            Err(libc::EEXIST)
        );
        std::fs::hard_link(t.path().join("own"), t.path().join("own2")).unwrap();
        made_or_found(&shm, &c("own2"), rw, 0).unwrap();
        assert_eq!(
            made_or_found(&shm, &c("none"), rw, 0).map(drop),
            Err(libc::ENOENT)
        );
        // Its last name gone, it is forgotten; before, it is not.
        std::fs::remove_file(t.path().join("own2")).unwrap();
        let last = shm.last_link(&c("own"));
        assert!(last.is_some());
        assert_eq!(shm.made.lock().unwrap().len(), 1);
        std::fs::remove_file(t.path().join("own")).unwrap();
        shm.forget_if(0, last);
        assert!(shm.made.lock().unwrap().is_empty());
        // Nothing but a regular file is opened, made or not.
        let fifo = c(t.path().join("fifo").to_str().unwrap());
        // SAFETY: mkfifo with a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        assert_eq!(
            made_or_found(&shm, &c("fifo"), rw | libc::O_NONBLOCK, 0).map(drop),
            Err(libc::EACCES)
        );
    }

    #[test]
    fn the_calls_that_open_link_rename_or_remove_a_name_are_claimed() {
        for nr in [
            libc::SYS_openat,
            libc::SYS_unlinkat,
            libc::SYS_linkat,
            libc::SYS_renameat,
            libc::SYS_renameat2,
        ] {
            assert!(claims(nr), "{nr}");
        }
        for nr in [libc::SYS_read, libc::SYS_newfstatat, libc::SYS_openat2] {
            assert!(!claims(nr), "{nr}");
        }
    }
}
