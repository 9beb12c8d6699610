//! The error protocol between the child and rootfence.
//!
//! Between `clone` and `exec` the child can only make raw system calls, so
//! a failed step is reported as three 32-bit words on a close-on-exec pipe:
//! the [`Step`], a detail (the index of the view operation, the rule or the
//! limit it was working on) and the errno. The child then exits 127 and
//! nothing is run. An empty pipe at `exec` means every step succeeded.
//! rootfence decodes the words ([`decode`]) into
//! [`SandboxError::ChildSetup`](super::SandboxError::ChildSetup).

use std::os::fd::RawFd;

/// A step of the child's setup, named in errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Step {
    /// Putting the standard streams in place.
    Stdio = 1,
    /// `setsid`.
    Setsid = 2,
    /// `prctl(PR_SET_PDEATHSIG)`.
    Pdeathsig = 3,
    /// rootfence exited before the server was started.
    ParentGone = 4,
    /// `setrlimit(RLIMIT_CORE, 0)`.
    CoreLimit = 5,
    /// `prctl(PR_SET_NO_NEW_PRIVS)`.
    NoNewPrivs = 6,
    /// Making the mount namespace private.
    MountPrivate = 7,
    /// Building the view's base (a `tmpfs` and the first `pivot_root`).
    ViewBase = 8,
    /// One operation of the view (the detail is its index).
    ViewOp = 9,
    /// A granted path's object is not the one that was checked (for a root,
    /// the one its handle holds).
    RootChanged = 10,
    /// Making the view's `/` read-only and entering it.
    ViewEnter = 11,
    /// `vm.memfd_noexec` for the PID namespace.
    MemfdNoexec = 12,
    /// `kernel.pid_max` for the PID namespace (`[resources] processes`).
    PidMax = 13,
    /// Starting the server under the namespace's init.
    Fork = 14,
    /// Opening a path ruled on in the child (`/proc`, a private layer).
    OpenChildRule = 15,
    /// `landlock_add_rule` for it.
    ChildRule = 16,
    /// `landlock_restrict_self`.
    Restrict = 17,
    /// Loading the seccomp filter.
    Seccomp = 18,
    /// Dropping capabilities.
    DropCaps = 19,
    /// `close_range(3, ~0, CLOSE_RANGE_CLOEXEC)`.
    CloseFds = 20,
    /// `execve` of the server.
    Exec = 21,
    /// Setting a resource limit of `[resources]` (the detail is its index).
    Rlimit = 22,
    /// Network by domain: loopback and the proxy's listener in the
    /// server's own network namespace (the detail: 0 loopback, 1 the
    /// listener, 2 sending it to rootfence).
    Network = 23,
    /// Joining the server's own cgroup (`[resources] memory_mb` and
    /// `processes`; the detail is the hierarchy's index).
    Cgroup = 24,
    /// Giving the server's user namespace its own inotify limits (the
    /// detail is the write's index; as root, 10 is the clone of `/proc`).
    Inotify = 25,
}

impl Step {
    /// Every step, for decoding.
    const ALL: [Step; 25] = [
        Step::Stdio,
        Step::Setsid,
        Step::Pdeathsig,
        Step::ParentGone,
        Step::CoreLimit,
        Step::NoNewPrivs,
        Step::MountPrivate,
        Step::ViewBase,
        Step::ViewOp,
        Step::RootChanged,
        Step::ViewEnter,
        Step::MemfdNoexec,
        Step::PidMax,
        Step::Fork,
        Step::OpenChildRule,
        Step::ChildRule,
        Step::Restrict,
        Step::Seccomp,
        Step::DropCaps,
        Step::CloseFds,
        Step::Exec,
        Step::Rlimit,
        Step::Network,
        Step::Cgroup,
        Step::Inotify,
    ];

    /// The step a number names.
    pub fn from_u32(v: u32) -> Option<Step> {
        Step::ALL.into_iter().find(|s| *s as u32 == v)
    }
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Step::Stdio => "set up the standard streams",
            Step::Setsid => "start a new session (setsid)",
            Step::Pdeathsig => "set the parent-death signal",
            Step::ParentGone => "start the server: rootfence exited first",
            Step::CoreLimit => "set RLIMIT_CORE to 0",
            Step::NoNewPrivs => "set no_new_privs",
            Step::MountPrivate => "make its mount namespace private",
            Step::ViewBase => "build the base of its filesystem view (tmpfs, pivot_root)",
            Step::ViewOp => "build its filesystem view",
            Step::RootChanged => {
                "mount a granted path: the object at its path is no longer the one that was checked (it was replaced, or a symlink put on its way, while the sandbox was being built)"
            }
            Step::ViewEnter => "enter its filesystem view",
            Step::MemfdNoexec => "make memfd files non-executable (vm.memfd_noexec)",
            Step::PidMax => {
                "bound its processes ([resources] processes, through its PID namespace's kernel.pid_max)"
            }
            Step::Fork => "start the server under its namespace's init",
            Step::OpenChildRule => "open a path ruled on in the child",
            Step::ChildRule => "add a Landlock rule in the child",
            Step::Restrict => "apply the Landlock ruleset (landlock_restrict_self)",
            Step::Seccomp => "load the seccomp filter",
            Step::DropCaps => "drop capabilities",
            Step::CloseFds => "close inherited descriptors",
            Step::Exec => "execute the server",
            Step::Rlimit => "set a resource limit of [resources]",
            Step::Network => {
                "set up its own network (loopback, and the listener of rootfence's network proxy)"
            }
            Step::Cgroup => {
                "join its own cgroup ([resources] memory_mb and processes)"
            }
            Step::Inotify => "give its user namespace its own inotify limits",
        })
    }
}

/// The errno of the last failed call.
pub(super) fn errno() -> i32 {
    // SAFETY: reading the calling thread's errno.
    unsafe { *libc::__errno_location() }
}

/// Report a failed step on the error pipe and exit 127.
///
/// # Safety
///
/// Async-signal-safe: `write` and `_exit`. Call only in the child.
pub(super) unsafe fn fail(err_w: RawFd, step: Step, detail: u32, errno: i32) -> ! {
    let words: [u32; 3] = [step as u32, detail, errno as u32];
    // SAFETY: writes 12 bytes from a local array.
    unsafe {
        libc::write(err_w, words.as_ptr().cast(), 12);
        libc::_exit(127)
    }
}

/// Decode what the error pipe carried: the step, its detail, the errno.
pub fn decode(bytes: &[u8]) -> Option<(Step, u32, std::io::Error)> {
    let word = |i: usize| -> Option<u32> {
        Some(u32::from_ne_bytes(
            bytes.get(i * 4..i * 4 + 4)?.try_into().ok()?,
        ))
    };
    let step = Step::from_u32(word(0)?)?;
    Some((
        step,
        word(1)?,
        std::io::Error::from_raw_os_error(word(2)? as i32),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_step_decodes_to_itself() {
        for s in Step::ALL {
            let mut bytes = Vec::new();
            for w in [s as u32, 7, libc::EPERM as u32] {
                bytes.extend_from_slice(&w.to_ne_bytes());
            }
            let (step, detail, e) = decode(&bytes).expect("decodes");
            assert_eq!((step, detail, e.raw_os_error()), (s, 7, Some(libc::EPERM)));
        }
        assert!(Step::from_u32(0).is_none());
        assert!(decode(&[1, 0, 0]).is_none());
    }
}
