//! The init (PID 1) of the server's PID namespace.
//!
//! With namespaces, the cloned child builds the view and then becomes its
//! namespace's init: it starts the server ([`start_and_reap`]), reaps every
//! process left to it, forwards the termination signals to the server, and
//! when the server exits kills and reaps every other process of the
//! namespace, writes the server's wait status to rootfence, and exits.
//! Should it die first (killed), the kernel kills every process left in the
//! PID namespace and its exit completes only once they are all gone. Either
//! way nothing the server started outlives it, whatever `setsid`, `fork` or
//! `setpgid` it used.

use std::os::fd::RawFd;

use super::protocol::{Step, errno, fail};

/// A stack mapped in the parent for the server's first moments in the
/// namespace: the init starts it with `CLONE_VM | CLONE_VFORK`, as
/// `posix_spawn` does, so the init's memory (a copy of all of rootfence's)
/// is neither copied again nor torn down at the server's `execve`; the init
/// is suspended until then.
#[derive(Debug)]
pub struct ServerStack {
    base: *mut libc::c_void,
    len: usize,
}

impl ServerStack {
    /// Bytes of stack: the server's steps before `execve` are raw system
    /// calls on a few locals.
    pub const LEN: usize = 256 * 1024;

    /// Map a fresh stack.
    pub fn new() -> std::io::Result<ServerStack> {
        // SAFETY: an anonymous private mapping; the result is checked.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                Self::LEN,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_STACK | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(ServerStack {
            base,
            len: Self::LEN,
        })
    }

    /// The top of the stack (it grows down), 16-byte aligned.
    fn top(&self) -> *mut libc::c_void {
        let end = self.base as usize + self.len;
        (end & !15) as *mut libc::c_void
    }
}

impl Drop for ServerStack {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the mapping made in `new`, once.
        unsafe {
            libc::munmap(self.base, self.len);
        }
    }
}

/// Signals the namespace's init passes on to the server.
const FORWARDED: &[libc::c_int] = &[
    libc::SIGTERM,
    libc::SIGINT,
    libc::SIGHUP,
    libc::SIGQUIT,
    libc::SIGUSR1,
    libc::SIGUSR2,
];

extern "C" fn noop(_: libc::c_int) {}

/// Start the server (`server(arg)` on `stack`, sharing this process's
/// memory until its `execve`), then be the namespace's init until it exits;
/// before it reports the server's status, it leaves the server's v1
/// cgroups (writing `0` to each of `leave`, rootfence's own cgroups'
/// `tasks`), so that rootfence finds them empty.
///
/// # Safety
///
/// Call only in the child, as PID 1 of its new PID namespace, after the
/// view is built. `arg` must stay valid until `server` executes or exits
/// (this process is suspended until then). Async-signal-safe.
pub(super) unsafe fn start_and_reap(
    err: RawFd,
    status_w: RawFd,
    leave: &[RawFd],
    stack: &ServerStack,
    server: extern "C" fn(*mut libc::c_void) -> libc::c_int,
    arg: *mut libc::c_void,
) -> ! {
    // SAFETY (whole body): raw system calls on locals and `stack`.
    unsafe {
        // The init forwards these; they must not be delivered to it (a PID
        // namespace's init ignores signals it has no handler for, so it
        // installs one, and takes them with sigwaitinfo).
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for s in FORWARDED.iter().chain(&[libc::SIGCHLD]) {
            libc::sigaddset(&mut set, *s);
        }
        libc::sigprocmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        for s in FORWARDED {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = noop as *const () as libc::sighandler_t;
            libc::sigaction(*s, &sa, std::ptr::null_mut());
        }
        // The server shares this process's memory, on its own stack, until
        // its `execve`; this process waits until then. rootfence's death
        // reaches it through the init (which dies with rootfence, taking
        // the namespace).
        let pid = libc::clone(
            server,
            stack.top(),
            libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
            arg,
        );
        if pid < 0 {
            fail(err, Step::Fork, 0, errno());
        }
        reap(pid, status_w, leave, &set)
    }
}

/// Reap everything, forward the termination signals to the server, exit
/// when it does (writing its wait status to the parent first). The kernel
/// then kills whatever is left in the namespace.
unsafe fn reap(server: libc::pid_t, status_w: RawFd, leave: &[RawFd], set: &libc::sigset_t) -> ! {
    // SAFETY (whole body): raw system calls on locals.
    unsafe {
        // Keep nothing of the server's: its pipes close when it exits.
        close_all_but(status_w, leave);
        loop {
            let sig = libc::sigwaitinfo(set, std::ptr::null_mut());
            if sig == libc::SIGCHLD {
                reap_exited(server, status_w, leave);
            } else if sig > 0 {
                libc::kill(server, sig);
            }
        }
    }
}

/// Close every descriptor but `status_w` and those of `leave` (at most
/// [`MAX_LEAVE`] of them; any beyond are closed).
///
/// # Safety
///
/// Async-signal-safe: `close_range` on a sorted local array.
unsafe fn close_all_but(status_w: RawFd, leave: &[RawFd]) {
    let mut keep = [-1 as RawFd; MAX_LEAVE + 1];
    keep[0] = status_w;
    for (k, fd) in keep[1..].iter_mut().zip(leave) {
        *k = *fd;
    }
    keep.sort_unstable();
    let mut from: u32 = 0;
    for fd in keep.into_iter().filter(|fd| *fd >= 0) {
        let fd = fd as u32;
        if fd > from {
            // SAFETY: close_range with integer arguments.
            unsafe { libc::syscall(libc::SYS_close_range, from, fd - 1, 0) };
        }
        from = fd.max(from) + 1;
    }
    // SAFETY: close_range with integer arguments.
    unsafe { libc::syscall(libc::SYS_close_range, from, u32::MAX, 0) };
}

/// The most cgroups a server has (one per hierarchy: v2, or v1's memory
/// and pids).
pub(super) const MAX_LEAVE: usize = 2;

/// Reap every exited process; when the server is one of them, end
/// everything else in the namespace and reap it all, then report and exit:
/// once the status is written, no process the server started is left (the
/// kernel then only has to tear the namespaces down).
unsafe fn reap_exited(server: libc::pid_t, status_w: RawFd, leave: &[RawFd]) {
    // SAFETY (whole body): raw system calls on locals.
    unsafe {
        loop {
            let mut status = 0;
            let r = libc::wait4(-1, &mut status, libc::WNOHANG, std::ptr::null_mut());
            if r <= 0 {
                return;
            }
            if r == server {
                libc::kill(-1, libc::SIGKILL);
                let mut other = 0;
                while libc::wait4(-1, &mut other, 0, std::ptr::null_mut()) > 0
                    || errno() == libc::EINTR
                {}
                // Out of the server's cgroup, now empty but for this
                // process: rootfence removes it once it has the status.
                for fd in leave.iter().take(MAX_LEAVE) {
                    libc::write(*fd, c"0".as_ptr().cast(), 1);
                }
                libc::write(status_w, (&raw const status).cast(), 4);
                libc::_exit(0);
            }
        }
    }
}
