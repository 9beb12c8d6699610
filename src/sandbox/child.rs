//! What runs in the child between `clone` and `exec`.
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
//! - **With namespaces** (the kernel grants rootfence a user namespace): the
//!   cloned child is the first process (PID 1) of new user, mount, PID and
//!   IPC namespaces.
//!   It waits until the parent has written its uid and gid maps, builds the
//!   filesystem view ([`super::view`]), forks the server, and stays as the
//!   namespace's init: it reaps every process left to it, forwards the
//!   termination signals to the server, and when the server exits kills and
//!   reaps every other process of the namespace, writes the server's wait
//!   status to the parent, and exits. Should it die first (killed), the
//!   kernel kills every process left in the PID namespace and its exit
//!   completes only once they are all gone. Either way nothing the server
//!   started outlives it, whatever `setsid`, `fork` or `setpgid` it used.
//! - **Without namespaces**: the cloned child is the server itself.
//!
//! Either way the server process applies, in this order: `setsid` (no
//! controlling terminal), parent-death signal `SIGKILL`, `RLIMIT_CORE` 0,
//! `no_new_privs`, the Landlock rules that can only be made in the child
//! (the fresh `/proc`, private layers; or the server's own `/proc/self`
//! without namespaces), `landlock_restrict_self`, capabilities dropped,
//! every descriptor above 2 close-on-exec, signal dispositions and mask
//! reset, the seccomp filter (last, so that it need allow none of the steps
//! before; its listener, when rootfence supervises some calls, is sent to
//! rootfence and closed), `execve`.
//!
//! `PR_SET_DUMPABLE` is deliberately not set: `execve` resets it to 1 for
//! an ordinary program. Core dumps are stopped by `RLIMIT_CORE` 0 (which
//! survives `execve`); tracing out of the sandbox is stopped by Landlock (a
//! sandboxed process cannot trace a process outside its domain) and by the
//! capabilities dropped.
//!
//! Failures are written to the error pipe as three 32-bit words: the
//! [`Step`], a detail (the index of the mount operation) and the errno; the
//! child then exits with 127 and nothing is run.

use std::ffi::CString;
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
}

impl Step {
    /// The step a number names.
    pub fn from_u32(v: u32) -> Option<Step> {
        Some(match v {
            1 => Step::Stdio,
            2 => Step::Setsid,
            3 => Step::Pdeathsig,
            4 => Step::ParentGone,
            5 => Step::CoreLimit,
            6 => Step::NoNewPrivs,
            7 => Step::MountPrivate,
            8 => Step::ViewBase,
            9 => Step::ViewOp,
            10 => Step::RootChanged,
            11 => Step::ViewEnter,
            12 => Step::MemfdNoexec,
            14 => Step::Fork,
            15 => Step::OpenChildRule,
            16 => Step::ChildRule,
            17 => Step::Restrict,
            18 => Step::Seccomp,
            19 => Step::DropCaps,
            20 => Step::CloseFds,
            21 => Step::Exec,
            _ => return None,
        })
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
            Step::Fork => "start the server under its namespace's init",
            Step::OpenChildRule => "open a path ruled on in the child",
            Step::ChildRule => "add a Landlock rule in the child",
            Step::Restrict => "apply the Landlock ruleset (landlock_restrict_self)",
            Step::Seccomp => "load the seccomp filter",
            Step::DropCaps => "drop capabilities",
            Step::CloseFds => "close inherited descriptors",
            Step::Exec => "execute the server",
        })
    }
}

/// `struct landlock_path_beneath_attr` (packed, as in the kernel UAPI).
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// `struct mount_attr` (`MOUNT_ATTR_SIZE_VER0`).
#[repr(C)]
struct MountAttr {
    attr_set: u64,
    attr_clr: u64,
    propagation: u64,
    userns_fd: u64,
}

const LANDLOCK_RULE_PATH_BENEATH: libc::c_long = 1;
/// `MOUNT_ATTR_RDONLY` and friends.
pub const MOUNT_ATTR_RDONLY: u64 = 0x1;
/// No set-user-ID.
pub const MOUNT_ATTR_NOSUID: u64 = 0x2;
/// No device files.
pub const MOUNT_ATTR_NODEV: u64 = 0x4;
/// No execution.
pub const MOUNT_ATTR_NOEXEC: u64 = 0x8;

/// A Landlock rule the child makes itself: a path opened in the child (the
/// fresh `/proc`, a private layer, or the server's own `/proc/self`).
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

/// Capabilities to drop.
#[derive(Debug, Clone, Copy)]
pub struct DropCaps {
    /// The highest capability number to try; the loop stops at the first
    /// one the kernel does not know.
    pub last_cap: u32,
    /// Empty the bounding set too (root: otherwise `exec` gives every
    /// capability in it back). Needs `CAP_SETPCAP`.
    pub bounding: bool,
}

/// Where the host's tree is while the view is built (removed before the
/// server runs).
pub const HOST: &str = "/.rootfence-host";

/// One operation of the filesystem view, ready for the child: targets are
/// absolute paths of the view, sources absolute paths below [`HOST`].
#[derive(Debug)]
pub enum ViewOp {
    /// `mkdir`.
    Dir(CString),
    /// An empty file (mount point).
    File(CString),
    /// A copy of a small host file.
    Copy {
        /// Source, below [`HOST`].
        src: CString,
        /// Target.
        dst: CString,
    },
    /// `symlink(text, at)`.
    Symlink {
        /// Where.
        at: CString,
        /// Its text.
        text: CString,
    },
    /// A recursive bind mount, made from descriptors: the source opened
    /// without following any symlink and checked, cloned (`open_tree`),
    /// and moved onto the target opened the same way (`move_mount`).
    Bind {
        /// Source, below [`HOST`] (a canonical path: no symlink in it).
        src: CString,
        /// Target (canonical too).
        dst: CString,
        /// `MOUNT_ATTR_*` it must have (recursively).
        attrs: u64,
        /// Whether they are set on their own once the whole view has its
        /// default attributes ([`VIEW_ATTRS`]).
        fixup: bool,
        /// The (device, inode) the source must have.
        identity: Option<(u64, u64)>,
        /// The target is the same object as the source (it lies inside a
        /// mounted grant): checked too.
        on_itself: bool,
    },
    /// An overlay mount; `data` holds the lower, upper and work layers,
    /// the lower one as `/proc/self/fd/<slot>` of the host's `/proc`.
    Overlay {
        /// Target.
        dst: CString,
        /// The mount data.
        data: CString,
        /// The lower layer, below [`HOST`]: opened without following
        /// symlinks, checked, and put at descriptor `slot`.
        lower: CString,
        /// The (device, inode) the lower layer must have.
        identity: Option<(u64, u64)>,
        /// The descriptor number `data` names.
        slot: RawFd,
    },
    /// A fresh procfs.
    Proc {
        /// Target.
        dst: CString,
    },
    /// An empty read-only tmpfs over a directory.
    Mask {
        /// Target.
        dst: CString,
    },
    /// An empty writable tmpfs of the server's own (its private home
    /// directory): `nosuid`, `nodev`, `noexec`.
    Tmpfs {
        /// Target.
        dst: CString,
        /// Mount options (`mode=0700,size=...`).
        opts: CString,
    },
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
    /// Where the view's base `tmpfs` is mounted before the first
    /// `pivot_root` (an existing directory).
    pub base: CString,
    /// The operations building the view.
    pub ops: Vec<ViewOp>,
    /// The working directory to enter in the view (else `/`).
    pub cwd: Option<CString>,
    /// Set `vm.memfd_noexec = 2` for the PID namespace.
    pub memfd_noexec: bool,
    /// The stack the server runs on between the init's `clone` and its
    /// `execve` (it shares the init's memory until then).
    pub server_stack: ServerStack,
    /// One slot per operation: the descriptor of each bind mount's tree,
    /// kept until its attributes are set (so they are set on that very
    /// mount, not on whatever a path names by then). Filled in the child.
    pub tree_fds: Vec<std::cell::Cell<RawFd>>,
}

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
        let argv_ptrs = argv
            .iter()
            .map(|a| a.as_ptr())
            .chain(std::iter::once(std::ptr::null()))
            .collect();
        let envp_ptrs = envp
            .iter()
            .map(|a| a.as_ptr())
            .chain(std::iter::once(std::ptr::null()))
            .collect();
        ExecImage {
            program,
            _argv: argv,
            _envp: envp,
            argv_ptrs,
            envp_ptrs,
        }
    }
}

/// Everything the child does between `clone` and `exec`, prepared in the
/// parent.
#[derive(Debug)]
pub struct ChildSetup {
    /// rootfence's pid (without namespaces: to detect that it died before
    /// the parent-death signal was armed).
    pub parent_pid: libc::pid_t,
    /// The error pipe's write end (close-on-exec).
    pub err_w: RawFd,
    /// Descriptors (all above 2) to install as 0, 1 and 2; `None` keeps
    /// rootfence's.
    pub stdio: [Option<RawFd>; 3],
    /// Namespaces, `None` without.
    pub ns: Option<NsChild>,
    /// Landlock, `None` when running unconfined.
    pub landlock: Option<LandlockChild>,
    /// The seccomp program, `None` when running unconfined.
    pub seccomp: Option<Vec<libc::sock_filter>>,
    /// A socket to send the filter's listener to rootfence on (the filter
    /// hands some calls to rootfence's supervisor); `None` when it does
    /// not.
    pub notify_sock: Option<RawFd>,
    /// Capabilities to drop, `None` when there are none or unconfined.
    pub drop_caps: Option<DropCaps>,
    /// What to execute.
    pub exec: ExecImage,
}

// SAFETY: raw descriptors, C strings and pointers into them are plain data;
// the child reads them after clone, when it is the only thread.
unsafe impl Send for ChildSetup {}
// SAFETY: as above; the child takes `&self` and mutates nothing shared.
unsafe impl Sync for ChildSetup {}

/// The errno of the last failed call.
fn errno() -> i32 {
    // SAFETY: reading the calling thread's errno.
    unsafe { *libc::__errno_location() }
}

/// Report a failed step on the error pipe and exit 127.
///
/// # Safety
///
/// Async-signal-safe: `write` and `_exit`.
unsafe fn fail(err_w: RawFd, step: Step, detail: u32, errno: i32) -> ! {
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

/// `"/proc/sys/vm/memfd_noexec"` of the view being built.
const MEMFD_NOEXEC: &[u8] = b"/proc/sys/vm/memfd_noexec\0";

/// The attributes the whole view gets once built.
pub const VIEW_ATTRS: u64 = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;

impl ChildSetup {
    /// Run the child: set up, then `execve` the server. Never returns.
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
    pub unsafe fn run(&self) -> ! {
        let err = self.err_w;
        // SAFETY (whole body): raw system calls with valid arguments; every
        // pointer passed points to a local or to memory owned by `self`.
        unsafe {
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
                None => {
                    // rootfence may have died between clone and the prctl:
                    // then the signal will never come.
                    if libc::getppid() != self.parent_pid {
                        fail(err, Step::ParentGone, 0, libc::ESRCH);
                    }
                }
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
                build_view(err, ns);
                // The init forwards these; they must not be delivered to
                // it (a PID namespace's init ignores signals it has no
                // handler for, so it installs one, and takes them with
                // sigwaitinfo).
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
                // The server shares this process's memory, on its own
                // stack, until its `execve`; this process waits until then.
                // rootfence's death reaches it through the init (which dies
                // with rootfence, taking the namespace).
                let pid = libc::clone(
                    server_main,
                    ns.server_stack.top(),
                    libc::CLONE_VM | libc::CLONE_VFORK | libc::SIGCHLD,
                    (self as *const ChildSetup).cast_mut().cast(),
                );
                if pid < 0 {
                    fail(err, Step::Fork, 0, errno());
                }
                init(pid, ns.status_w, &set);
            }
            self.confine_and_exec()
        }
    }

    /// The server's own steps: Landlock, seccomp, capabilities, descriptors,
    /// signals, `execve`.
    unsafe fn confine_and_exec(&self) -> ! {
        let err = self.err_w;
        // SAFETY (whole body): as in `run`.
        unsafe {
            if let Some(ll) = &self.landlock {
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
            // Dispositions rootfence set (the Rust runtime ignores SIGPIPE)
            // survive execve when ignored: back to the defaults.
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
            // The filter last, so that it need allow nothing of the steps
            // above; its listener (when rootfence supervises some calls)
            // goes to rootfence and is closed here.
            if let Some(filter) = &self.seccomp {
                load_filter(err, filter, self.notify_sock);
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

/// Load the seccomp program; with `notify_sock`, with a listener for the
/// calls it hands to rootfence, sent over that socket and closed here.
///
/// # Safety
///
/// Async-signal-safe: raw system calls on `filter` and locals.
unsafe fn load_filter(err: RawFd, filter: &[libc::sock_filter], notify_sock: Option<RawFd>) {
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
            fail(err, Step::Seccomp, 0, errno());
        }
        let Some(sock) = notify_sock else { return };
        let listener = r as libc::c_int;
        // One descriptor as SCM_RIGHTS, in a control buffer on the stack.
        let mut cbuf = [0u64; 4];
        let mut byte = 0u8;
        let mut iov = libc::iovec {
            iov_base: (&raw mut byte).cast(),
            iov_len: 1,
        };
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = cbuf.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(std::mem::size_of::<libc::c_int>() as u32) as _;
        let cmsg = libc::CMSG_FIRSTHDR(&msg);
        (*cmsg).cmsg_level = libc::SOL_SOCKET;
        (*cmsg).cmsg_type = libc::SCM_RIGHTS;
        (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) as _;
        std::ptr::write_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::c_int>(), listener);
        if libc::sendmsg(sock, &msg, libc::MSG_NOSIGNAL) != 1 {
            fail(err, Step::Seccomp, 1, errno());
        }
        libc::close(listener);
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

/// Build the filesystem view and enter it.
unsafe fn build_view(err: RawFd, ns: &NsChild) {
    // SAFETY (whole body): raw system calls on C strings owned by `ns`.
    unsafe {
        if libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) < 0
        {
            fail(err, Step::MountPrivate, 0, errno());
        }
        // The view's tmpfs, mounted on the base directory, becomes `/`;
        // the host's tree goes under it at HOST until the view is built.
        let tmpfs = c"tmpfs";
        let host = c"/.rootfence-host";
        let base_ok = libc::mount(
            tmpfs.as_ptr(),
            ns.base.as_ptr(),
            tmpfs.as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            c"mode=0755".as_ptr().cast(),
        ) == 0
            && libc::chdir(ns.base.as_ptr()) == 0
            && libc::mkdir(c".rootfence-host".as_ptr(), 0o700) == 0
            && libc::syscall(
                libc::SYS_pivot_root,
                c".".as_ptr(),
                c".rootfence-host".as_ptr(),
            ) == 0
            && libc::chdir(c"/".as_ptr()) == 0;
        if !base_ok {
            fail(err, Step::ViewBase, 0, errno());
        }
        for (i, op) in ns.ops.iter().enumerate() {
            let i = i as u32;
            match op {
                ViewOp::Dir(p) => {
                    if libc::mkdir(p.as_ptr(), 0o755) < 0 && errno() != libc::EEXIST {
                        fail(err, Step::ViewOp, i, errno());
                    }
                }
                ViewOp::File(p) => {
                    let fd = libc::open(
                        p.as_ptr(),
                        libc::O_CREAT | libc::O_WRONLY | libc::O_CLOEXEC | libc::O_NOFOLLOW,
                        0o644,
                    );
                    if fd < 0 {
                        fail(err, Step::ViewOp, i, errno());
                    }
                    libc::close(fd);
                }
                ViewOp::Copy { src, dst } => {
                    let from = open_beneath(src, libc::O_RDONLY);
                    if from < 0 {
                        fail(err, Step::ViewOp, i, errno());
                    }
                    let to = libc::open(
                        dst.as_ptr(),
                        libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_CLOEXEC,
                        0o644,
                    );
                    if to < 0 {
                        fail(err, Step::ViewOp, i, errno());
                    }
                    loop {
                        let n = libc::sendfile(to, from, std::ptr::null_mut(), 1 << 16);
                        if n == 0 {
                            break;
                        }
                        if n < 0 {
                            fail(err, Step::ViewOp, i, errno());
                        }
                    }
                    libc::close(from);
                    libc::close(to);
                }
                ViewOp::Symlink { at, text } => {
                    if libc::symlink(text.as_ptr(), at.as_ptr()) < 0 {
                        fail(err, Step::ViewOp, i, errno());
                    }
                }
                ViewOp::Bind {
                    src,
                    dst,
                    identity,
                    on_itself,
                    ..
                } => {
                    let from = open_beneath(src, libc::O_PATH);
                    if from < 0 {
                        fail(err, Step::ViewOp, i, errno());
                    }
                    if !same_object(from, *identity) {
                        fail(err, Step::RootChanged, i, libc::ESTALE);
                    }
                    let tree = libc::syscall(
                        libc::SYS_open_tree,
                        from,
                        c"".as_ptr(),
                        OPEN_TREE_CLONE | libc::O_CLOEXEC as u32 | AT_RECURSIVE | AT_EMPTY_PATH,
                    ) as libc::c_int;
                    if tree < 0 {
                        fail(err, Step::ViewOp, i, errno());
                    }
                    libc::close(from);
                    let to = open_beneath(dst, libc::O_PATH);
                    if to < 0 {
                        fail(err, Step::ViewOp, i, errno());
                    }
                    if *on_itself && !same_object(to, *identity) {
                        fail(err, Step::RootChanged, i, libc::ESTALE);
                    }
                    if libc::syscall(
                        libc::SYS_move_mount,
                        tree,
                        c"".as_ptr(),
                        to,
                        c"".as_ptr(),
                        MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH,
                    ) < 0
                    {
                        fail(err, Step::ViewOp, i, errno());
                    }
                    libc::close(to);
                    if let Some(slot) = ns.tree_fds.get(i as usize) {
                        slot.set(tree);
                    } else {
                        libc::close(tree);
                    }
                }
                ViewOp::Overlay {
                    dst,
                    data,
                    lower,
                    identity,
                    slot,
                } => {
                    let from = open_beneath(lower, libc::O_PATH | libc::O_DIRECTORY);
                    if from < 0 {
                        fail(err, Step::ViewOp, i, errno());
                    }
                    if !same_object(from, *identity) {
                        fail(err, Step::RootChanged, i, libc::ESTALE);
                    }
                    if libc::dup2(from, *slot) < 0 {
                        fail(err, Step::ViewOp, i, errno());
                    }
                    libc::close(from);
                    let ovl = c"overlay";
                    if libc::mount(
                        ovl.as_ptr(),
                        dst.as_ptr(),
                        ovl.as_ptr(),
                        libc::MS_NOSUID | libc::MS_NODEV,
                        data.as_ptr().cast(),
                    ) < 0
                    {
                        fail(err, Step::ViewOp, i, errno());
                    }
                    libc::close(*slot);
                }
                ViewOp::Mask { .. } => {}
                ViewOp::Tmpfs { dst, opts } => {
                    if libc::mount(
                        tmpfs.as_ptr(),
                        dst.as_ptr(),
                        tmpfs.as_ptr(),
                        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                        opts.as_ptr().cast(),
                    ) < 0
                    {
                        fail(err, Step::ViewOp, i, errno());
                    }
                }
                ViewOp::Proc { dst } => {
                    // Only the processes the reader could trace are
                    // visible: the server sees its own, not the init.
                    let proc = c"proc";
                    if libc::mount(
                        proc.as_ptr(),
                        dst.as_ptr(),
                        proc.as_ptr(),
                        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                        c"hidepid=ptraceable".as_ptr().cast(),
                    ) < 0
                    {
                        fail(err, Step::ViewOp, i, errno());
                    }
                }
            }
        }
        // The memfd setting is written through /proc/sys before it is
        // masked below.
        if ns.memfd_noexec {
            let fd = libc::open(
                MEMFD_NOEXEC.as_ptr().cast(),
                libc::O_WRONLY | libc::O_CLOEXEC,
            );
            if fd < 0 || libc::write(fd, c"2".as_ptr().cast(), 1) != 1 {
                fail(err, Step::MemfdNoexec, 0, errno());
            }
            libc::close(fd);
        }
        for (i, op) in ns.ops.iter().enumerate() {
            if let ViewOp::Mask { dst } = op
                && libc::mount(
                    tmpfs.as_ptr(),
                    dst.as_ptr(),
                    tmpfs.as_ptr(),
                    libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    c"size=4k,mode=0555".as_ptr().cast(),
                ) < 0
            {
                fail(err, Step::ViewOp, i as u32, errno());
            }
        }
        // The host's tree goes; then the whole view gets its default
        // attributes in one call, and the mounts that differ get theirs,
        // outer mounts first.
        let detached = libc::umount2(host.as_ptr(), libc::MNT_DETACH) == 0
            && libc::rmdir(host.as_ptr()) == 0
            && mount_setattr(Target::Path(c"/"), VIEW_ATTRS, 0) == 0;
        if !detached {
            fail(err, Step::ViewEnter, 0, errno());
        }
        for (i, op) in ns.ops.iter().enumerate() {
            let tree = ns.tree_fds.get(i).map_or(-1, std::cell::Cell::get);
            let (at, set, clr) = match op {
                ViewOp::Bind {
                    attrs, fixup: true, ..
                } => {
                    let clr = VIEW_ATTRS & !attrs;
                    (Target::Fd(tree), *attrs, clr | (MOUNT_ATTR_NOEXEC & !attrs))
                }
                // A private layer is written and run from (npx and uvx run
                // what a cache holds), also inside the noexec private home.
                ViewOp::Overlay { dst, .. } => (
                    Target::Path(dst),
                    MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                    MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOEXEC,
                ),
                ViewOp::Tmpfs { dst, .. } => (
                    Target::Path(dst),
                    MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
                    MOUNT_ATTR_RDONLY,
                ),
                _ => continue,
            };
            // A mount the host made noexec (and, in a user namespace,
            // locked so) stays noexec.
            if mount_setattr(at, set, clr) < 0
                && !(errno() == libc::EPERM
                    && mount_setattr(at, set, clr & !MOUNT_ATTR_NOEXEC) == 0)
            {
                fail(err, Step::ViewOp, i as u32, errno());
            }
        }
        for t in &ns.tree_fds {
            if t.get() >= 0 {
                libc::close(t.get());
            }
        }
        if let Some(cwd) = &ns.cwd
            && libc::chdir(cwd.as_ptr()) < 0
        {
            libc::chdir(c"/".as_ptr());
        }
    }
}

/// What `mount_setattr` acts on.
#[derive(Clone, Copy)]
enum Target<'a> {
    /// A path (no symlink followed at its end).
    Path(&'a std::ffi::CStr),
    /// A mount's descriptor.
    Fd(RawFd),
}

/// `mount_setattr(at, AT_RECURSIVE)` setting `set` and clearing `clr`.
unsafe fn mount_setattr(at: Target<'_>, set: u64, clr: u64) -> libc::c_long {
    let a = MountAttr {
        attr_set: set,
        attr_clr: clr,
        propagation: 0,
        userns_fd: 0,
    };
    let (dfd, path, flags) = match at {
        Target::Path(p) => (libc::AT_FDCWD, p, libc::AT_SYMLINK_NOFOLLOW),
        Target::Fd(fd) => (fd, c"", libc::AT_EMPTY_PATH),
    };
    // SAFETY: mount_setattr reads the struct above and the C string.
    unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            dfd,
            path.as_ptr(),
            libc::AT_RECURSIVE | flags,
            &a as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    }
}

/// `open_tree` and `move_mount` flags, and `openat2`'s `struct open_how`
/// with its `resolve` flags.
const OPEN_TREE_CLONE: u32 = 1;
const AT_RECURSIVE: u32 = 0x8000;
const AT_EMPTY_PATH: u32 = 0x1000;
const MOVE_MOUNT_F_EMPTY_PATH: u32 = 0x04;
const MOVE_MOUNT_T_EMPTY_PATH: u32 = 0x40;
const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
const RESOLVE_NO_SYMLINKS: u64 = 0x04;

#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// Open `path` (absolute) with `flags`, following no symlink on the way:
/// the view's paths are canonical, so a symlink met is one put there
/// since they were surveyed (`ELOOP`). A descriptor, or -1.
unsafe fn open_beneath(path: &std::ffi::CStr, flags: libc::c_int) -> libc::c_int {
    let how = OpenHow {
        flags: (flags | libc::O_CLOEXEC | libc::O_NOFOLLOW) as u64,
        mode: 0,
        resolve: RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    };
    // SAFETY: openat2 reads the struct and the C string.
    unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            path.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        ) as libc::c_int
    }
}

/// Whether `fd` is the object `identity` names (always, without one).
unsafe fn same_object(fd: libc::c_int, identity: Option<(u64, u64)>) -> bool {
    let Some((dev, ino)) = identity else {
        return true;
    };
    // SAFETY: fstat into a zeroed local.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        libc::fstat(fd, &mut st) == 0 && st.st_dev == dev && st.st_ino == ino
    }
}

/// The PID namespace's init: reap everything, forward the termination
/// signals to the server, exit when it does (writing its wait status to
/// the parent first). The kernel then kills whatever is left in the
/// namespace.
unsafe fn init(server: libc::pid_t, status_w: RawFd, set: &libc::sigset_t) -> ! {
    // SAFETY (whole body): raw system calls on locals.
    unsafe {
        // Keep nothing of the server's: its pipes close when it exits.
        if status_w > 0 {
            libc::syscall(libc::SYS_close_range, 0u32, (status_w - 1) as u32, 0);
        }
        libc::syscall(libc::SYS_close_range, (status_w + 1) as u32, u32::MAX, 0);
        loop {
            let sig = libc::sigwaitinfo(set, std::ptr::null_mut());
            if sig == libc::SIGCHLD {
                loop {
                    let mut status = 0;
                    let r = libc::wait4(-1, &mut status, libc::WNOHANG, std::ptr::null_mut());
                    if r <= 0 {
                        break;
                    }
                    if r == server {
                        // End everything else in the namespace and reap it
                        // all, then report: once the status is written, no
                        // process the server started is left (the kernel
                        // then only has to tear the namespaces down).
                        libc::kill(-1, libc::SIGKILL);
                        let mut other = 0;
                        while libc::wait4(-1, &mut other, 0, std::ptr::null_mut()) > 0
                            || *libc::__errno_location() == libc::EINTR
                        {}
                        libc::write(status_w, (&raw const status).cast(), 4);
                        libc::_exit(0);
                    }
                }
            } else if sig > 0 {
                libc::kill(server, sig);
            }
        }
    }
}

unsafe fn drop_capabilities(err: RawFd, caps: DropCaps) {
    // SAFETY (whole body): prctl and capset on locals.
    unsafe {
        if caps.bounding {
            for cap in 0..=caps.last_cap {
                if libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) < 0 {
                    // Past the kernel's last capability: done.
                    if cap > 0 && errno() == libc::EINVAL {
                        break;
                    }
                    fail(err, Step::DropCaps, cap, errno());
                }
            }
        }
        if libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        ) < 0
        {
            fail(err, Step::DropCaps, 100, errno());
        }
        let mut header = CapHeader {
            version: LINUX_CAPABILITY_VERSION_3,
            pid: 0,
        };
        let data = [CapData::default(); 2];
        if libc::syscall(
            libc::SYS_capset,
            &mut header as *mut CapHeader,
            data.as_ptr(),
        ) < 0
        {
            fail(err, Step::DropCaps, 101, errno());
        }
    }
}

const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;

/// `struct __user_cap_header_struct`.
#[repr(C)]
pub struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

/// `struct __user_cap_data_struct`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// What the calling process holds, for deciding what the child drops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CapState {
    /// The child would start with capabilities (root, or any capability
    /// effective, permitted or inheritable): they must be dropped.
    pub must_drop: bool,
    /// `CAP_SETPCAP` is effective, so the bounding set can be emptied.
    pub can_drop_bounding: bool,
    /// The effective user is root (`exec` gives root the bounding set).
    pub root: bool,
}

const CAP_SETPCAP: u32 = 8;

/// The calling process's capabilities.
pub fn cap_state() -> CapState {
    let mut header = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: capget writes two `CapData` into `data`.
    let r = unsafe {
        libc::syscall(
            libc::SYS_capget,
            &mut header as *mut CapHeader,
            data.as_mut_ptr(),
        )
    };
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if r < 0 {
        // Cannot tell: try to drop everything (the child fails loudly if
        // it cannot).
        return CapState {
            must_drop: true,
            can_drop_bounding: root,
            root,
        };
    }
    let held = data
        .iter()
        .any(|d| d.effective | d.permitted | d.inheritable != 0);
    CapState {
        must_drop: root || held,
        can_drop_bounding: data[0].effective & (1 << CAP_SETPCAP) != 0,
        root,
    }
}

/// Exit codes of the probe child.
mod probe_exit {
    pub const OK: i32 = 0;
    pub const NO_OVERLAY: i32 = 1;
    pub const PARENT: i32 = 10;
    pub const PRIVATE: i32 = 11;
    pub const TMPFS: i32 = 12;
    pub const PROC: i32 = 13;
    pub const SETATTR: i32 = 14;
}

/// Find out, by a test launch, whether this process can give a server its
/// namespaces: a child in new user, mount, PID and IPC namespaces
/// makes its mounts private, mounts a `tmpfs`, a fresh `/proc` and an
/// overlay, and sets a mount attribute.
pub fn probe_namespaces() -> super::probe::NamespaceSupport {
    use super::probe::NamespaceSupport;
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let no = |why: String| NamespaceSupport {
        available: false,
        overlay: false,
        root,
        why: Some(why),
    };
    let Ok((sync_r, sync_w)) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC) else {
        return no("cannot create a pipe".into());
    };
    let sync_r_raw = std::os::fd::AsRawFd::as_raw_fd(&sync_r);
    // SAFETY: clone_args is plain data.
    let mut args: libc::clone_args = unsafe { std::mem::zeroed() };
    args.flags =
        (libc::CLONE_NEWUSER | libc::CLONE_NEWNS | libc::CLONE_NEWPID | libc::CLONE_NEWIPC) as u64;
    args.exit_signal = libc::SIGCHLD as u64;
    // SAFETY: fork-like clone3; the child runs only `probe_child` (raw
    // system calls on static strings), which never returns.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &mut args as *mut libc::clone_args,
            std::mem::size_of::<libc::clone_args>(),
        )
    };
    if pid == 0 {
        // SAFETY: we are the clone's child.
        unsafe { probe_child(sync_r_raw) }
    }
    drop(sync_r);
    if pid < 0 {
        let e = std::io::Error::last_os_error();
        return no(format!(
            "the kernel refused new user, mount, PID and IPC namespaces ({e}){}",
            userns_hint()
        ));
    }
    let pid = pid as libc::pid_t;
    let (uid, gid) = {
        // SAFETY: geteuid and getegid cannot fail.
        unsafe { (libc::geteuid(), libc::getegid()) }
    };
    let maps = if root {
        std::fs::write(format!("/proc/{pid}/uid_map"), "0 0 4294967295\n")
            .and_then(|()| std::fs::write(format!("/proc/{pid}/gid_map"), "0 0 4294967295\n"))
    } else {
        std::fs::write(format!("/proc/{pid}/setgroups"), "deny")
            .and_then(|()| {
                std::fs::write(format!("/proc/{pid}/uid_map"), format!("{uid} {uid} 1\n"))
            })
            .and_then(|()| {
                std::fs::write(format!("/proc/{pid}/gid_map"), format!("{gid} {gid} 1\n"))
            })
    };
    if maps.is_ok() {
        let _ = rustix::io::write(&sync_w, &[1u8]);
    }
    drop(sync_w);
    let mut status = 0;
    // SAFETY: reaping our own child.
    unsafe {
        libc::waitpid(pid, &mut status, 0);
    }
    if let Err(e) = maps {
        return no(format!(
            "cannot write the new user namespace's id maps ({e})"
        ));
    }
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    let failed = |what: &str| {
        no(format!(
            "in a new user namespace, {what} failed{}",
            userns_hint()
        ))
    };
    match code {
        probe_exit::OK => NamespaceSupport {
            available: true,
            overlay: true,
            root,
            why: None,
        },
        probe_exit::NO_OVERLAY => NamespaceSupport {
            available: true,
            overlay: false,
            root,
            why: None,
        },
        probe_exit::PRIVATE => failed("making the mounts private"),
        probe_exit::TMPFS => failed("mounting a tmpfs"),
        probe_exit::PROC => failed("mounting a fresh /proc"),
        probe_exit::SETATTR => failed("mount_setattr"),
        probe_exit::PARENT => no("the probe was not started".into()),
        other => no(format!("the probe ended with status {other}")),
    }
}

fn userns_hint() -> &'static str {
    if std::fs::read_to_string("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
        .is_ok_and(|v| v.trim() == "1")
    {
        " (AppArmor restricts unprivileged user namespaces here: kernel.apparmor_restrict_unprivileged_userns = 1)"
    } else {
        ""
    }
}

/// The probe's child: see [`probe_namespaces`].
unsafe fn probe_child(sync_r: RawFd) -> ! {
    // SAFETY (whole body): raw system calls on static C strings.
    unsafe {
        let mut b = 0u8;
        if libc::read(sync_r, (&raw mut b).cast(), 1) != 1 {
            libc::_exit(probe_exit::PARENT);
        }
        let null = std::ptr::null();
        if libc::mount(
            null,
            c"/".as_ptr(),
            null,
            libc::MS_REC | libc::MS_PRIVATE,
            null.cast(),
        ) < 0
        {
            libc::_exit(probe_exit::PRIVATE);
        }
        let tmpfs = c"tmpfs";
        if libc::mount(
            tmpfs.as_ptr(),
            c"/tmp".as_ptr(),
            tmpfs.as_ptr(),
            0,
            null.cast(),
        ) < 0
        {
            libc::_exit(probe_exit::TMPFS);
        }
        for d in [c"/tmp/p", c"/tmp/l", c"/tmp/u", c"/tmp/w", c"/tmp/m"] {
            libc::mkdir(d.as_ptr(), 0o755);
        }
        let proc = c"proc";
        if libc::mount(
            proc.as_ptr(),
            c"/tmp/p".as_ptr(),
            proc.as_ptr(),
            0,
            null.cast(),
        ) < 0
        {
            libc::_exit(probe_exit::PROC);
        }
        let a = MountAttr {
            attr_set: MOUNT_ATTR_RDONLY,
            attr_clr: 0,
            propagation: 0,
            userns_fd: 0,
        };
        if libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            c"/tmp/p".as_ptr(),
            0,
            &a as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        ) < 0
        {
            libc::_exit(probe_exit::SETATTR);
        }
        let ovl = c"overlay";
        if libc::mount(
            ovl.as_ptr(),
            c"/tmp/m".as_ptr(),
            ovl.as_ptr(),
            0,
            c"lowerdir=/tmp/l,upperdir=/tmp/u,workdir=/tmp/w,userxattr"
                .as_ptr()
                .cast(),
        ) < 0
        {
            libc::_exit(probe_exit::NO_OVERLAY);
        }
        libc::_exit(probe_exit::OK)
    }
}
