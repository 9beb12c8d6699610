//! What runs in the child between `fork` and `exec`.
//!
//! # Why a `pre_exec` hook and not a re-exec'd helper
//!
//! rootfence applies the sandbox in the forked child, just before `exec`,
//! from a [`std::process::Command::pre_exec`] hook. Everything that
//! allocates or can fail in an interesting way (opening every granted path,
//! building the Landlock ruleset and adding its rules, compiling the seccomp
//! program, the C strings of argv and the environment) is done in the parent
//! before `fork`. The hook then makes only raw system calls on memory
//! prepared in advance: no allocation, no lock, no `std` I/O, nothing that
//! could deadlock on a lock held by another thread of a multi-threaded
//! (tokio) parent at the moment of `fork`.
//!
//! The one rule the parent cannot prepare is the server's own `/proc/self`:
//! opened in the parent it would name rootfence's `/proc/<pid>`. The child
//! opens `/proc/self` (`openat`, `O_PATH`) and adds it to the ruleset with a
//! raw `landlock_add_rule` before `landlock_restrict_self`.
//!
//! A helper mode that re-executes rootfence would make the child
//! single-threaded and free to allocate, but would cost a second `exec` and
//! a second dynamic-loader start on every launch (launch latency is a
//! measured target), would have to pass the plan across `exec`, and would
//! leave a window in which the helper runs unconfined with all of
//! rootfence's code mapped. The hook keeps one `exec`, and the restriction is
//! applied to the very thread that calls `execve`.
//!
//! `PR_SET_DUMPABLE` is deliberately not set: `execve` resets it to 1 for
//! an ordinary program, so it would promise protection that does not
//! survive into the server. Core dumps are stopped by `RLIMIT_CORE` 0 (which
//! does survive `execve`); tracing out of the sandbox is stopped by Landlock
//! (a sandboxed process cannot trace a process outside its domain) and by
//! the capabilities dropped.
//!
//! Failures are reported through the standard library's exec-error pipe: the
//! returned `io::Error` carries the step and the errno (see [`Step`]), which
//! the parent decodes with [`decode`].

use std::io;
use std::os::fd::RawFd;

/// A step of the child's setup, named in errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Step {
    /// `setsid`.
    Setsid = 1,
    /// `prctl(PR_SET_PDEATHSIG)`.
    Pdeathsig = 2,
    /// rootfence exited before the server was started.
    ParentGone = 3,
    /// `setrlimit(RLIMIT_CORE, 0)`.
    CoreLimit = 4,
    /// `prctl(PR_SET_NO_NEW_PRIVS)`.
    NoNewPrivs = 5,
    /// Opening `/proc/self`.
    OpenProcSelf = 6,
    /// `landlock_add_rule` for `/proc/self`.
    ProcSelfRule = 7,
    /// `landlock_restrict_self`.
    Restrict = 8,
    /// Loading the seccomp filter.
    Seccomp = 9,
    /// Dropping capabilities.
    DropCaps = 10,
    /// `close_range(3, ~0, CLOSE_RANGE_CLOEXEC)`.
    CloseFds = 11,
}

impl Step {
    fn from_u8(v: u8) -> Option<Step> {
        Some(match v {
            1 => Step::Setsid,
            2 => Step::Pdeathsig,
            3 => Step::ParentGone,
            4 => Step::CoreLimit,
            5 => Step::NoNewPrivs,
            6 => Step::OpenProcSelf,
            7 => Step::ProcSelfRule,
            8 => Step::Restrict,
            9 => Step::Seccomp,
            10 => Step::DropCaps,
            11 => Step::CloseFds,
            _ => return None,
        })
    }
}

impl std::fmt::Display for Step {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Step::Setsid => "start a new session (setsid)",
            Step::Pdeathsig => "set the parent-death signal",
            Step::ParentGone => "start the server: rootfence exited first",
            Step::CoreLimit => "set RLIMIT_CORE to 0",
            Step::NoNewPrivs => "set no_new_privs",
            Step::OpenProcSelf => "open the server's /proc/self",
            Step::ProcSelfRule => "add the Landlock rule for /proc/self",
            Step::Restrict => "apply the Landlock ruleset (landlock_restrict_self)",
            Step::Seccomp => "load the seccomp filter",
            Step::DropCaps => "drop capabilities",
            Step::CloseFds => "close inherited descriptors",
        })
    }
}

/// Marks an errno that carries a [`Step`] (bits 16..24) and an errno (bits
/// 0..16). Real errno values are below 4096.
const MARK: i32 = 0x4000_0000;

/// The error a failed step returns: the step and the current errno.
fn fail(step: Step) -> io::Error {
    let errno = io::Error::last_os_error().raw_os_error().unwrap_or(0);
    io::Error::from_raw_os_error(MARK | (i32::from(step as u8) << 16) | (errno & 0xffff))
}

/// Split an error returned by `spawn` into the failed step and the errno,
/// if it came from [`ChildSetup::apply`].
pub fn decode(e: &io::Error) -> Option<(Step, io::Error)> {
    let raw = e.raw_os_error()?;
    if raw & MARK == 0 {
        return None;
    }
    let step = Step::from_u8(((raw >> 16) & 0xff) as u8)?;
    Some((step, io::Error::from_raw_os_error(raw & 0xffff)))
}

/// `struct landlock_path_beneath_attr` (packed, as in the kernel UAPI).
#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

const LANDLOCK_RULE_PATH_BENEATH: libc::c_long = 1;

/// The Landlock part of the child's setup.
#[derive(Debug)]
pub struct LandlockChild {
    /// The ruleset, with every rule but `/proc/self`. The parent keeps the
    /// owning descriptor open until `spawn` returns.
    pub ruleset: RawFd,
    /// Access rights for the `/proc/self` rule; 0 for no rule.
    pub proc_self_access: u64,
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

/// Everything the child does between `fork` and `exec`, prepared in the
/// parent.
#[derive(Debug)]
pub struct ChildSetup {
    /// rootfence's pid, to detect that it died before the parent-death
    /// signal was armed.
    pub parent_pid: libc::pid_t,
    /// Landlock, `None` when running unconfined.
    pub landlock: Option<LandlockChild>,
    /// The seccomp program, `None` when running unconfined.
    pub seccomp: Option<Vec<libc::sock_filter>>,
    /// Capabilities to drop, `None` when there are none or unconfined.
    pub drop_caps: Option<DropCaps>,
}

// SAFETY: the raw descriptor and the filter are plain data; the child reads
// them after fork, when it is the only thread.
unsafe impl Send for ChildSetup {}
// SAFETY: as above; `apply` takes `&self` and mutates nothing shared.
unsafe impl Sync for ChildSetup {}

/// `"/proc/self"` as a C string.
const PROC_SELF_C: &[u8] = b"/proc/self\0";

impl ChildSetup {
    /// Apply the setup to the calling process, in this order: new session;
    /// parent-death signal `SIGKILL` (and exit if rootfence is already
    /// gone); `RLIMIT_CORE` 0; `no_new_privs`; the `/proc/self` rule and
    /// `landlock_restrict_self`; the seccomp filter; capabilities dropped
    /// (bounding, ambient, then effective, permitted and inheritable);
    /// every descriptor above 2 marked close-on-exec.
    ///
    /// # Safety
    ///
    /// Call only in the forked child before `exec` (it restricts the
    /// calling thread irreversibly). It is async-signal-safe: raw system
    /// calls on memory prepared before `fork`, no allocation, no lock.
    ///
    /// # Security
    ///
    /// When it returns `Ok`, the calling thread is confined by the Landlock
    /// ruleset and the seccomp filter it was given, and `exec` will not
    /// carry any descriptor but 0, 1 and 2.
    pub unsafe fn apply(&self) -> io::Result<()> {
        // SAFETY (whole body): raw system calls with valid arguments; the
        // pointers passed point to locals or to memory owned by `self`.
        unsafe {
            if libc::setsid() < 0 {
                return Err(fail(Step::Setsid));
            }
            if libc::prctl(
                libc::PR_SET_PDEATHSIG,
                libc::SIGKILL as libc::c_ulong,
                0,
                0,
                0,
            ) < 0
            {
                return Err(fail(Step::Pdeathsig));
            }
            // rootfence may have died between fork and the prctl: then the
            // signal will never come and the server would run orphaned.
            if libc::getppid() != self.parent_pid {
                *libc::__errno_location() = libc::ESRCH;
                return Err(fail(Step::ParentGone));
            }
            let zero = libc::rlimit {
                rlim_cur: 0,
                rlim_max: 0,
            };
            if libc::setrlimit(libc::RLIMIT_CORE, &zero) < 0 {
                return Err(fail(Step::CoreLimit));
            }
            if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 {
                return Err(fail(Step::NoNewPrivs));
            }
            if let Some(ll) = &self.landlock {
                if ll.proc_self_access != 0 {
                    let fd = libc::syscall(
                        libc::SYS_openat,
                        libc::AT_FDCWD,
                        PROC_SELF_C.as_ptr(),
                        libc::O_PATH | libc::O_CLOEXEC | libc::O_DIRECTORY,
                        0,
                    );
                    if fd < 0 {
                        return Err(fail(Step::OpenProcSelf));
                    }
                    let fd = fd as libc::c_int;
                    let attr = PathBeneathAttr {
                        allowed_access: ll.proc_self_access,
                        parent_fd: fd,
                    };
                    let r = libc::syscall(
                        libc::SYS_landlock_add_rule,
                        ll.ruleset,
                        LANDLOCK_RULE_PATH_BENEATH,
                        &attr as *const PathBeneathAttr,
                        0,
                    );
                    if r < 0 {
                        return Err(fail(Step::ProcSelfRule));
                    }
                    libc::close(fd);
                }
                if libc::syscall(libc::SYS_landlock_restrict_self, ll.ruleset, 0) < 0 {
                    return Err(fail(Step::Restrict));
                }
            }
            if let Some(filter) = &self.seccomp {
                let prog = libc::sock_fprog {
                    len: filter.len() as libc::c_ushort,
                    filter: filter.as_ptr().cast_mut(),
                };
                if libc::syscall(
                    libc::SYS_seccomp,
                    libc::SECCOMP_SET_MODE_FILTER,
                    0,
                    &prog as *const libc::sock_fprog,
                ) < 0
                {
                    return Err(fail(Step::Seccomp));
                }
            }
            if let Some(caps) = self.drop_caps {
                if caps.bounding {
                    for cap in 0..=caps.last_cap {
                        if libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) < 0 {
                            // Past the kernel's last capability: done.
                            if cap > 0 && *libc::__errno_location() == libc::EINVAL {
                                break;
                            }
                            return Err(fail(Step::DropCaps));
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
                    return Err(fail(Step::DropCaps));
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
                    return Err(fail(Step::DropCaps));
                }
            }
            if libc::syscall(
                libc::SYS_close_range,
                3u32,
                u32::MAX,
                libc::CLOSE_RANGE_CLOEXEC,
            ) < 0
            {
                return Err(fail(Step::CloseFds));
            }
        }
        Ok(())
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
