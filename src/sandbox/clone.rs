//! Starting a process: `clone3`, or `clone` where `clone3` is refused.
//!
//! `clone3` answers `ENOSYS` inside Docker's default seccomp profile,
//! Flatpak, Chromium-derived sandboxes, gVisor and rootfence's own filter
//! (its flags are in memory a filter cannot read), where libc falls back to
//! `clone`. rootfence does the same: the first start finds which call works
//! and every later one (the namespace probe's and every launch's) uses it.
//! Both are called fork-like (no `CLONE_VM`, no new stack) with
//! `CLONE_PIDFD`, so the guarantees are the same: the child runs in a copy
//! of the caller's memory, and the parent holds a pidfd for it. `clone3`
//! can also start the child in a cgroup v2 (`CLONE_INTO_CGROUP`), which
//! spares the child moving itself there ([`start_into`]).

use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::sync::OnceLock;

/// Which system call starts processes on this machine, as the first start
/// found out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CloneCall {
    /// `clone3` (Linux 5.3 and later, where no filter refuses it).
    Clone3,
    /// `clone`: `clone3` answered `ENOSYS` (or was refused on its own
    /// while `clone` was not).
    Clone,
}

/// What the first start found; unset until then.
static FOUND: OnceLock<CloneCall> = OnceLock::new();

/// The call starts use here, once a start has found out.
pub fn found() -> Option<CloneCall> {
    FOUND.get().copied()
}

/// A started child: its pid and a pidfd for it.
#[derive(Debug)]
pub struct Started {
    /// The child's pid.
    pub pid: libc::pid_t,
    /// A pidfd for it.
    pub pidfd: OwnedFd,
}

/// Start a child with the `CLONE_*` namespace `flags` (plus `CLONE_PIDFD`
/// and `SIGCHLD` as its exit signal) that runs `child` and nothing else.
///
/// `clone3` is tried unless an earlier start found it refused; on `ENOSYS`
/// (or `EPERM` from a filter that refuses `clone3` itself), `clone` is used
/// and remembered. An error is the kernel's answer to the call that was
/// used last (`EPERM` for namespaces a filter or the kernel refuses).
///
/// # Safety
///
/// The child is a copy of this process with only the calling thread:
/// `child` must be async-signal-safe (raw system calls on memory prepared
/// before, no allocation, no lock) and never return (the child exits 127
/// if it does).
pub unsafe fn start<F: Fn()>(flags: u64, child: F) -> io::Result<Started> {
    // SAFETY: as this function's contract.
    unsafe { start_into(flags, None, |_| child()) }
}

/// `CLONE_INTO_CGROUP` (Linux 5.7).
const CLONE_INTO_CGROUP: u64 = 0x2_0000_0000;

/// As [`start`], the child born in the cgroup v2 whose directory
/// `cgroup` is open, where `clone3` can do that (`CLONE_INTO_CGROUP`:
/// moving a running process would wait for an RCU grace period, this does
/// not). `child` is told whether it was; if not, it must join the cgroup
/// itself.
///
/// # Safety
///
/// As [`start`].
pub unsafe fn start_into<F: Fn(bool)>(
    flags: u64,
    cgroup: Option<RawFd>,
    child: F,
) -> io::Result<Started> {
    if found() != Some(CloneCall::Clone) {
        if let Some(fd) = cgroup {
            // SAFETY: as this function's contract.
            if let Ok(s) = unsafe { clone3(flags, Some(fd), &child) } {
                let _ = FOUND.set(CloneCall::Clone3);
                return Ok(s);
            }
            // Refused (clone3 itself, or the cgroup): tried again below
            // without it, the child joining it itself.
        }
        // SAFETY: as this function's contract.
        match unsafe { clone3(flags, None, &child) } {
            Ok(s) => {
                let _ = FOUND.set(CloneCall::Clone3);
                return Ok(s);
            }
            Err(e) if e.raw_os_error() == Some(libc::ENOSYS) => {
                tracing::debug!("clone3 is refused here (ENOSYS): starting processes with clone");
                let _ = FOUND.set(CloneCall::Clone);
            }
            Err(e) if e.raw_os_error() == Some(libc::EPERM) && found().is_none() => {
                // A filter that refuses clone3 itself, or namespaces the
                // kernel refuses: clone tells which.
                // SAFETY: as this function's contract.
                return match unsafe { clone(flags, &child) } {
                    Ok(s) => {
                        let _ = FOUND.set(CloneCall::Clone);
                        Ok(s)
                    }
                    Err(_) => Err(e),
                };
            }
            Err(e) => return Err(e),
        }
    }
    // SAFETY: as this function's contract.
    unsafe { clone(flags, &child) }
}

/// `clone3` with `flags`, fork-like, into the cgroup v2 `cgroup` when
/// given.
///
/// # Safety
///
/// As [`start`].
unsafe fn clone3<F: Fn(bool)>(flags: u64, cgroup: Option<RawFd>, child: &F) -> io::Result<Started> {
    let mut pidfd: libc::c_int = -1;
    // SAFETY: clone_args is plain data; zeroed is a valid value.
    let mut args: libc::clone_args = unsafe { std::mem::zeroed() };
    args.flags = flags | libc::CLONE_PIDFD as u64;
    args.pidfd = (&raw mut pidfd) as u64;
    args.exit_signal = libc::SIGCHLD as u64;
    if let Some(fd) = cgroup {
        args.flags |= CLONE_INTO_CGROUP;
        args.cgroup = fd as u64;
    }
    // SAFETY: clone3 without CLONE_VM and without a stack is fork-like: the
    // child gets a copy of this address space and continues here with
    // return value 0, then runs only `child`, which never returns.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &mut args as *mut libc::clone_args,
            std::mem::size_of::<libc::clone_args>(),
        )
    };
    // SAFETY: as above.
    unsafe { finish(pid, pidfd, cgroup.is_some(), child) }
}

/// `clone` with `flags`, fork-like (no new stack: the child continues on a
/// copy of this one).
///
/// # Safety
///
/// As [`start`].
unsafe fn clone<F: Fn(bool)>(flags: u64, child: &F) -> io::Result<Started> {
    let mut pidfd: libc::c_int = -1;
    let flags = flags | libc::CLONE_PIDFD as u64 | libc::SIGCHLD as u64;
    // SAFETY: clone(flags, newsp = 0, parent_tid = &pidfd, ...) is
    // fork-like; with CLONE_PIDFD the kernel stores the pidfd through the
    // parent_tid argument (the third on every architecture).
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone,
            flags as libc::c_ulong,
            0usize,
            &raw mut pidfd,
            0usize,
            0usize,
        )
    };
    // SAFETY: as above.
    unsafe { finish(pid, pidfd, false, child) }
}

/// After a fork-like call: run `child` in the child (telling it whether
/// it was born `in_cgroup`), wrap the pidfd in the parent.
///
/// # Safety
///
/// As [`start`]; `pid` is the call's return value.
unsafe fn finish<F: Fn(bool)>(
    pid: libc::c_long,
    pidfd: libc::c_int,
    in_cgroup: bool,
    child: &F,
) -> io::Result<Started> {
    if pid == 0 {
        child(in_cgroup);
        // `child` never returns; were it to, the child must not go on as a
        // copy of rootfence.
        // SAFETY: ending the child.
        unsafe { libc::_exit(127) }
    }
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(Started {
        pid: pid as libc::pid_t,
        // SAFETY: the kernel returned a new pidfd we own.
        pidfd: unsafe { OwnedFd::from_raw_fd(pidfd) },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_runs_and_its_pidfd_is_ours() {
        // SAFETY: the child only calls _exit.
        let s = unsafe { start(0, || libc::_exit(7)) }.expect("start");
        let mut status = 0;
        // SAFETY: reaping our own child.
        assert_eq!(unsafe { libc::waitpid(s.pid, &mut status, 0) }, s.pid);
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 7);
        assert!(found().is_some());
    }

    #[test]
    fn clone_starts_the_same_child_as_clone3() {
        // SAFETY: the child only calls _exit.
        let s = unsafe { clone(0, &|_| libc::_exit(9)) }.expect("clone");
        let mut status = 0;
        // SAFETY: reaping our own child.
        assert_eq!(unsafe { libc::waitpid(s.pid, &mut status, 0) }, s.pid);
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 9);
    }

    /// Where a cgroup v2 can be made (root, the unified hierarchy
    /// mounted), a child started into it is there from its first
    /// instruction; elsewhere nothing is shown.
    #[test]
    fn a_child_is_born_in_the_cgroup_it_is_started_into() {
        let Some(mount) = ["/sys/fs/cgroup", "/sys/fs/cgroup/unified"]
            .into_iter()
            .find(|m| std::path::Path::new(m).join("cgroup.procs").exists())
        else {
            return;
        };
        let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let Some(own) = own.lines().find_map(|l| l.strip_prefix("0::")) else {
            return;
        };
        let name = format!("rootfence-clone-test-{}", std::process::id());
        let own = own.trim_end_matches('/');
        let dir = format!("{mount}{own}/{name}");
        if std::fs::create_dir(&dir).is_err() {
            return;
        }
        let fd = std::fs::File::open(&dir).expect("the cgroup's directory");
        let want = std::ffi::CString::new(format!("0::{own}/{name}\n")).unwrap();
        let child = |in_cgroup: bool| {
            // SAFETY: raw reads of /proc/self/cgroup into a local, then
            // _exit.
            unsafe {
                let f = libc::open(c"/proc/self/cgroup".as_ptr(), libc::O_RDONLY);
                let mut buf = [0u8; 4096];
                let n = libc::read(f, buf.as_mut_ptr().cast(), buf.len());
                let text = &buf[..n.max(0) as usize];
                let want = want.as_bytes();
                let there = text.windows(want.len()).any(|w| w == want);
                libc::_exit(match (in_cgroup, there) {
                    (true, true) => 0,
                    (false, _) => 2,
                    (true, false) => 3,
                })
            }
        };
        use std::os::fd::AsRawFd;
        // SAFETY: the child reads a file and exits.
        let s = unsafe { start_into(0, Some(fd.as_raw_fd()), child) }.expect("start");
        let mut status = 0;
        // SAFETY: reaping our own child.
        unsafe { libc::waitpid(s.pid, &mut status, 0) };
        let _ = std::fs::remove_dir(&dir);
        assert!(libc::WIFEXITED(status), "{status}");
        // Where clone3 works it was born there; else (a filter refusing
        // clone3) it was told it was not.
        let want = if found() == Some(CloneCall::Clone) {
            2
        } else {
            0
        };
        assert_eq!(libc::WEXITSTATUS(status), want);
    }
}
