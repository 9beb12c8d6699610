//! What the server may write: where a lock is real though a descriptor
//! was opened only for reading (see [`super::locks`]).

use std::os::fd::{AsRawFd, OwnedFd};

use super::notif::last;

/// The files the server may write (where a lock is real though it opened
/// the file only for reading: flock(1), a directory, a read-only sqlite
/// connection).
#[derive(Debug, Clone, Default)]
pub enum Writable {
    /// None known: only a descriptor opened for writing is locked.
    #[default]
    Unknown,
    /// What lies on a mount of the server's view that is not read-only
    /// (its roots, its home, its scratch: the view mounts everything else
    /// read-only).
    View,
    /// What lies under one of these paths (Landlock's write grants).
    Under(Vec<std::path::PathBuf>),
}

impl Writable {
    /// Whether the file `f` (rootfence's copy) is the server's to write.
    pub(super) fn holds(&self, f: &OwnedFd) -> bool {
        match self {
            Writable::Unknown => false,
            Writable::View => rustix::fs::fstatvfs(f)
                .is_ok_and(|v| !v.f_flag.contains(rustix::fs::StatVfsMountFlags::RDONLY)),
            Writable::Under(grants) => {
                // The path it was opened by: fixed in the open file, which
                // the server cannot change under rootfence's copy.
                let Ok(path) = std::fs::read_link(format!("/proc/self/fd/{}", f.as_raw_fd()))
                else {
                    return false;
                };
                path.is_absolute() && grants.iter().any(|g| path.starts_with(g))
            }
        }
    }
}

/// Whether `f` is a character or block device.
pub(super) fn is_device(f: &OwnedFd) -> bool {
    rustix::fs::fstat(f).is_ok_and(|st| {
        let kind = st.st_mode & libc::S_IFMT;
        kind == libc::S_IFCHR || kind == libc::S_IFBLK
    })
}

/// The descriptor's status flags (its open mode).
pub(super) fn fd_flags(f: &OwnedFd) -> Result<i32, i32> {
    // SAFETY: F_GETFL on a descriptor we hold.
    let r = unsafe { libc::fcntl(f.as_raw_fd(), libc::F_GETFL) };
    if r < 0 {
        return Err(last());
    }
    Ok(r)
}

/// Whether a lock on `f` (rootfence's copy of a descriptor, or an `O_PATH`
/// descriptor of its file), opened with `flags`, is real: what
/// [`super::locks`] locks for real, and not as nothing.
pub(super) fn locks_for_real(f: &OwnedFd, flags: i32, own: &Writable) -> bool {
    flags & libc::O_PATH == 0
        && !is_device(f)
        && (flags & libc::O_ACCMODE != libc::O_RDONLY || own.holds(f))
}
