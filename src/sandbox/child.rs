//! What runs in the child between `clone` and `exec`: the steps of the
//! launch that only the new process can take.
//!
//! # Why raw system calls on memory prepared in the parent
//!
//! rootfence is a multi-threaded (tokio) process. After `clone` without
//! `CLONE_VM` only the cloning thread exists in the child, and any lock
//! another thread held (the allocator's, stdio's) stays locked forever.
//! Everything that allocates or can fail in an interesting way (opening
//! every granted path, building the Landlock ruleset, compiling the seccomp
//! program, the C strings of argv, the environment and every mount
//! operation) is done in the parent before `clone`. The child makes only
//! raw system calls on that memory: no allocation, no lock, no `std` I/O.
//!
//! # Two shapes
//!
//! - **With namespaces**: the cloned child is the first process (PID 1) of
//!   new mount, PID and IPC namespaces (and a user namespace unless
//!   rootfence is root). It waits until the parent has written its uid and
//!   gid maps, with network by domain sets up its network namespace
//!   ([`super::netns`]: loopback, the proxy's listener sent to rootfence),
//!   builds the filesystem view ([`super::mount`]), and becomes the
//!   namespace's init ([`super::init`]), which starts the server.
//! - **Without namespaces**: the cloned child is the server itself.
//!
//! First of all the child joins the server's own cgroup (where one can be
//! had, [`super::cgroup`]; on v2 `clone3` may have started it there), so
//! that everything it and the server do is counted there. With
//! namespaces, as root, the server's first step is a user namespace made
//! for it with its own inotify limits ([`super::inotify`]).
//!
//! Either way the server process applies, in this order: `setsid` (no
//! controlling terminal), parent-death signal `SIGKILL`, `RLIMIT_CORE` 0,
//! `no_new_privs`, the limits of `[resources]`, the Landlock rules that can
//! only be made in the child (the fresh `/proc`, private layers, the sized
//! scratch; or the server's own `/proc/self` without namespaces),
//! `landlock_restrict_self`, capabilities dropped, every descriptor above 2
//! close-on-exec, signal dispositions and mask reset, the seccomp filter
//! (last, so that it need allow none of the steps before; its listener,
//! when rootfence supervises some calls, is sent to rootfence and closed),
//! `execve`.
//!
//! `PR_SET_DUMPABLE` is deliberately not set: `execve` resets it to 1 for
//! an ordinary program. Core dumps are stopped by `RLIMIT_CORE` 0 (which
//! survives `execve`); tracing out of the sandbox is stopped by Landlock (a
//! sandboxed process cannot trace a process outside its domain), by the
//! PID namespace and by the capabilities dropped.
//!
//! A failed step is reported through [`super::protocol`] and nothing is
//! run.

use std::ffi::CString;
use std::os::fd::RawFd;

use super::caps::{DropCaps, drop_capabilities};
use super::cgroup::Join;
use super::init::{ServerStack, start_and_reap};
use super::inotify::enter_user_namespace;
use super::mount::{ViewSetup, build_view};
use super::netns::{NetChild, setup_in_child};
use super::protocol::{Step, errno, fail};

/// `struct landlock_path_beneath_attr` (packed, as in the kernel UAPI).
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

const LANDLOCK_RULE_PATH_BENEATH: libc::c_long = 1;

/// A Landlock rule the child makes itself: a path opened in the child (the
/// fresh `/proc`, a private layer, the sized scratch, or the server's own
/// `/proc/self`).
#[derive(Debug)]
pub struct ChildRule {
    /// The path, opened with `O_PATH` in the child.
    pub path: CString,
    /// The Landlock access rights.
    pub access: u64,
}

/// The Landlock part of the child's setup.
#[derive(Debug)]
pub struct LandlockChild {
    /// The ruleset, with every rule the parent could make. The parent keeps
    /// the owning descriptor open until the launch is over.
    pub ruleset: RawFd,
    /// Rules made in the child before restricting.
    pub rules: Vec<ChildRule>,
}

/// The namespace part of the child's setup.
#[derive(Debug)]
pub struct NsChild {
    /// Read end of the parent's go-ahead pipe (one byte once the uid and
    /// gid maps are written; the parent holds the write end until the
    /// launch is over, so a hang-up means rootfence died).
    pub sync_r: RawFd,
    /// Write end of the status pipe: the server's wait status.
    pub status_w: RawFd,
    /// The view.
    pub view: ViewSetup,
    /// The stack the server runs on between the init's `clone` and its
    /// `execve` (it shares the init's memory until then).
    pub server_stack: ServerStack,
    /// Network by domain: the server's own network namespace, where the
    /// init makes the proxy's listener (see [`super::netns`]).
    pub net: Option<NetChild>,
    /// rootfence's own v1 cgroups' `tasks`, open for writing: the init
    /// moves itself back there once the rest of the namespace is gone.
    pub cgroup_leave: Vec<RawFd>,
}

/// The program to execute, with argv and the environment as C arrays.
#[derive(Debug)]
pub struct ExecImage {
    /// The program's path.
    pub program: CString,
    /// Owned argv strings (the pointers below point into them).
    _argv: Vec<CString>,
    /// Owned environment strings.
    _envp: Vec<CString>,
    /// NULL-terminated pointers into `argv`.
    pub argv_ptrs: Vec<*const libc::c_char>,
    /// NULL-terminated pointers into `envp`.
    pub envp_ptrs: Vec<*const libc::c_char>,
}

impl ExecImage {
    /// Build the C arrays.
    pub fn new(program: CString, argv: Vec<CString>, envp: Vec<CString>) -> ExecImage {
        let ptrs = |v: &[CString]| {
            v.iter()
                .map(|a| a.as_ptr())
                .chain(std::iter::once(std::ptr::null()))
                .collect()
        };
        ExecImage {
            argv_ptrs: ptrs(&argv),
            envp_ptrs: ptrs(&envp),
            program,
            _argv: argv,
            _envp: envp,
        }
    }
}

/// A resource limit the server gets (soft and hard).
pub type Rlimit = (libc::__rlimit_resource_t, libc::rlimit);

/// Everything the child does between `clone` and `exec`, prepared in the
/// parent.
#[derive(Debug)]
pub struct ChildSetup {
    /// rootfence's pid (without namespaces: to detect that it died before
    /// the parent-death signal was armed).
    pub parent_pid: libc::pid_t,
    /// The error pipe's write end (close-on-exec).
    pub err_w: RawFd,
    /// The server's own cgroups' files the child writes itself into first
    /// of all (at most one per hierarchy; a v2 one not when `clone3`
    /// started it there).
    pub cgroup_join: Vec<Join>,
    /// Descriptors (all above 2) to install as 0, 1 and 2; `None` keeps
    /// rootfence's.
    pub stdio: [Option<RawFd>; 3],
    /// Namespaces, `None` without.
    pub ns: Option<NsChild>,
    /// Landlock, `None` when running unconfined or on a kernel without it
    /// (the view and seccomp confine the server then).
    pub landlock: Option<LandlockChild>,
    /// The seccomp program, `None` when running unconfined.
    pub seccomp: Option<Vec<libc::sock_filter>>,
    /// The program to load instead, without a listener, where the kernel
    /// refuses `seccomp` a second one in this process's filters (`EBUSY`:
    /// rootfence inside a rootfence sandbox). Only where nothing but
    /// locks wanted the listener: the outer sandbox's supervisor judges
    /// them.
    pub seccomp_unsupervised: Option<Vec<libc::sock_filter>>,
    /// A socket to send the filter's listener to rootfence on (the filter
    /// hands some calls to rootfence's supervisor); `None` when it does
    /// not.
    pub notify_sock: Option<RawFd>,
    /// Capabilities to drop, `None` when there are none or unconfined.
    pub drop_caps: Option<DropCaps>,
    /// The limits of `[resources]` the server gets, set just before its
    /// own confinement.
    pub rlimits: Vec<Rlimit>,
    /// What to execute.
    pub exec: ExecImage,
    /// Without namespaces: the directory to start in (with them, the
    /// view's own says it).
    pub cwd: Option<CString>,
}

// SAFETY: raw descriptors, C strings and pointers into them are plain data;
// the child reads them after clone, when it is the only thread.
unsafe impl Send for ChildSetup {}
// SAFETY: as above; the child takes `&self` and mutates nothing shared
// (the view's descriptor slots are written in the child's copy only).
unsafe impl Sync for ChildSetup {}

/// The server's side of the init's `clone`: confine and execute.
extern "C" fn server_main(arg: *mut libc::c_void) -> libc::c_int {
    // SAFETY: `arg` is the `&ChildSetup` the init passed to `clone`; the
    // init is suspended (CLONE_VFORK) until this process executes or
    // exits, so the setup is alive and unchanged.
    let setup = unsafe { &*(arg as *const ChildSetup) };
    // SAFETY: the first action of a fresh process that runs only raw
    // system calls until `execve`.
    unsafe { setup.confine_and_exec() }
}

impl ChildSetup {
    /// Run the child: set up, then `execve` the server. Never returns.
    /// `in_cgroup`: `clone3` started it in the server's cgroup v2.
    ///
    /// # Safety
    ///
    /// Call only in the child of a `clone` without `CLONE_VM`, as its
    /// first and only action. Async-signal-safe: raw system calls on memory
    /// prepared before `clone`, no allocation, no lock.
    ///
    /// # Security
    ///
    /// The server is executed only after every step succeeded; otherwise
    /// the failed step is reported and nothing is run.
    pub unsafe fn run(&self, in_cgroup: bool) -> ! {
        let err = self.err_w;
        // SAFETY (whole body): raw system calls with valid arguments; every
        // pointer passed points to a local or to memory owned by `self`.
        unsafe {
            // Before anything it does is charged elsewhere.
            for (i, j) in self.cgroup_join.iter().enumerate() {
                if !(j.v2 && in_cgroup) && libc::write(j.fd, c"0".as_ptr().cast(), 1) != 1 {
                    fail(err, Step::Cgroup, i as u32, errno());
                }
            }
            for (i, fd) in self.stdio.iter().enumerate() {
                if let Some(fd) = *fd
                    && libc::dup2(fd, i as libc::c_int) < 0
                {
                    fail(err, Step::Stdio, i as u32, errno());
                }
            }
            if libc::setsid() < 0 {
                fail(err, Step::Setsid, 0, errno());
            }
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) < 0
            {
                fail(err, Step::Pdeathsig, 0, errno());
            }
            match &self.ns {
                Some(ns) => wait_for_parent(err, ns.sync_r),
                // rootfence may have died between clone and the prctl: then
                // the signal will never come.
                None if libc::getppid() != self.parent_pid => {
                    fail(err, Step::ParentGone, 0, libc::ESRCH)
                }
                None => {}
            }
            let zero = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            if libc::setrlimit(libc::RLIMIT_CORE, &zero) < 0 {
                fail(err, Step::CoreLimit, 0, errno());
            }
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 {
                fail(err, Step::NoNewPrivs, 0, errno());
            }
            if let Some(ns) = &self.ns {
                // Network by domain: before the server exists, so it never
                // holds the proxy's listener.
                if let Some(net) = &ns.net
                    && let Err((detail, e)) = setup_in_child(net)
                {
                    fail(err, Step::Network, detail, e);
                }
                build_view(err, &ns.view);
                start_and_reap(
                    err,
                    ns.status_w,
                    &ns.cgroup_leave,
                    &ns.server_stack,
                    server_main,
                    (self as *const ChildSetup).cast_mut().cast(),
                );
            }
            self.confine_and_exec()
        }
    }

    /// The server's own steps: (as root, with namespaces) a user namespace
    /// with its own inotify limits, Landlock, capabilities, descriptors,
    /// signals, seccomp, limits, `execve`.
    unsafe fn confine_and_exec(&self) -> ! {
        let err = self.err_w;
        // SAFETY (whole body): as in `run`.
        unsafe {
            // Where it starts (a failure leaves it where rootfence is).
            if self.ns.is_none()
                && let Some(cwd) = &self.cwd
            {
                libc::chdir(cwd.as_ptr());
            }
            if let Some(i) = self.ns.as_ref().and_then(|ns| ns.view.inotify.as_ref()) {
                enter_user_namespace(err, i);
            }
            if let Some(ll) = &self.landlock {
                restrict(err, ll);
            }
            if let Some(caps) = self.drop_caps {
                drop_capabilities(err, caps);
            }
            if libc::syscall(
                libc::SYS_close_range,
                3u32,
                u32::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            ) < 0
            {
                fail(err, Step::CloseFds, 0, errno());
            }
            reset_signals();
            // The filter last, so that it need allow nothing of the steps
            // above; its listener (when rootfence supervises some calls)
            // goes to rootfence and is closed here.
            if let Some(filter) = &self.seccomp {
                load_filter(
                    err,
                    filter,
                    self.notify_sock,
                    self.seccomp_unsupervised.as_deref(),
                );
            }
            // The limits just before `execve`: until then this process
            // holds rootfence's descriptors (closed at `execve`), and a
            // descriptor bound below their count would refuse the rules'
            // and the filter's own. `setrlimit` is on the filter's
            // allow-list; were it not, the launch would fail here, loudly.
            for (i, (resource, lim)) in self.rlimits.iter().enumerate() {
                if libc::setrlimit(*resource, lim) < 0 {
                    fail(err, Step::Rlimit, i as u32, errno());
                }
            }
            libc::execve(
                self.exec.program.as_ptr(),
                self.exec.argv_ptrs.as_ptr(),
                self.exec.envp_ptrs.as_ptr(),
            );
            fail(err, Step::Exec, 0, errno())
        }
    }
}

/// Make the rules only the child can make, then apply the ruleset.
unsafe fn restrict(err: RawFd, ll: &LandlockChild) {
    // SAFETY (whole body): raw system calls on C strings owned by `ll` and
    // locals.
    unsafe {
        for (i, r) in ll.rules.iter().enumerate() {
            let fd = libc::syscall(
                libc::SYS_openat,
                libc::AT_FDCWD,
                r.path.as_ptr(),
                libc::O_PATH | libc::O_CLOEXEC,
                0,
            );
            if fd < 0 {
                fail(err, Step::OpenChildRule, i as u32, errno());
            }
            let fd = fd as libc::c_int;
            let attr = PathBeneathAttr {
                allowed_access: r.access,
                parent_fd: fd,
            };
            let rc = libc::syscall(
                libc::SYS_landlock_add_rule,
                ll.ruleset,
                LANDLOCK_RULE_PATH_BENEATH,
                &attr as *const PathBeneathAttr,
                0,
            );
            if rc < 0 {
                fail(err, Step::ChildRule, i as u32, errno());
            }
            libc::close(fd);
        }
        if libc::syscall(libc::SYS_landlock_restrict_self, ll.ruleset, 0) < 0 {
            fail(err, Step::Restrict, 0, errno());
        }
    }
}

/// Dispositions rootfence set (the Rust runtime ignores SIGPIPE) survive
/// `execve` when ignored: back to the defaults, and an empty mask.
unsafe fn reset_signals() {
    // SAFETY (whole body): sigaction and sigprocmask on locals.
    unsafe {
        for s in 1..=64 {
            if s == libc::SIGKILL || s == libc::SIGSTOP {
                continue;
            }
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = libc::SIG_DFL;
            libc::sigaction(s, &sa, std::ptr::null_mut());
        }
        let mut empty: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut empty);
        libc::sigprocmask(libc::SIG_SETMASK, &empty, std::ptr::null_mut());
    }
}

/// Load the seccomp program; with `notify_sock`, with a listener for the
/// calls it hands to rootfence, sent over that socket and closed here.
///
/// # Safety
///
/// Async-signal-safe: raw system calls on `filter` and locals.
unsafe fn load_filter(
    err: RawFd,
    filter: &[libc::sock_filter],
    notify_sock: Option<RawFd>,
    unsupervised: Option<&[libc::sock_filter]>,
) {
    let prog = libc::sock_fprog {
        len: filter.len() as libc::c_ushort,
        filter: filter.as_ptr().cast_mut(),
    };
    let flags = if notify_sock.is_some() {
        libc::SECCOMP_FILTER_FLAG_NEW_LISTENER
    } else {
        0
    };
    // SAFETY (whole body): raw system calls on `prog`, `filter` and locals.
    unsafe {
        let r = libc::syscall(
            libc::SYS_seccomp,
            libc::SECCOMP_SET_MODE_FILTER,
            flags,
            &prog as *const libc::sock_fprog,
        );
        if r < 0 {
            let e = errno();
            // A listener in the filters around us already: without one,
            // where nothing but locks wanted it (the parent expects none).
            if e == libc::EBUSY
                && notify_sock.is_some()
                && let Some(plain) = unsupervised
            {
                let prog = libc::sock_fprog {
                    len: plain.len() as libc::c_ushort,
                    filter: plain.as_ptr().cast_mut(),
                };
                let r = libc::syscall(
                    libc::SYS_seccomp,
                    libc::SECCOMP_SET_MODE_FILTER,
                    0,
                    &prog as *const libc::sock_fprog,
                );
                if r < 0 {
                    fail(err, Step::Seccomp, 0, errno());
                }
                return;
            }
            fail(err, Step::Seccomp, 0, e);
        }
        let Some(sock) = notify_sock else { return };
        let listener = r as libc::c_int;
        if let Err(e) = super::fdpass::send(sock, listener) {
            fail(err, Step::Seccomp, 1, e);
        }
        libc::close(listener);
    }
}

/// Wait for the parent's go-ahead (its uid and gid maps are written), then
/// make sure it is still alive now that the parent-death signal is armed.
unsafe fn wait_for_parent(err: RawFd, sync_r: RawFd) {
    // SAFETY: raw reads and polls on our own descriptor into locals.
    unsafe {
        let mut b = 0u8;
        loop {
            let n = libc::read(sync_r, (&raw mut b).cast(), 1);
            if n == 1 {
                break;
            }
            if n < 0 && errno() == libc::EINTR {
                continue;
            }
            fail(err, Step::ParentGone, 0, libc::ESRCH);
        }
        let mut p = libc::pollfd {
            fd: sync_r,
            events: 0,
            revents: 0,
        };
        if libc::poll(&mut p, 1, 0) > 0 && p.revents & libc::POLLHUP != 0 {
            fail(err, Step::ParentGone, 0, libc::ESRCH);
        }
        libc::close(sync_r);
    }
}
