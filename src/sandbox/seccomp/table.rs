//! The allow-list: every system call a server may make, with why, and the
//! argument checks of those whose meaning depends on their arguments.
//!
//! Grouped as systemd's `@system-service` groups are; every entry carries
//! its reason. A call not listed here is refused with `ENOSYS`. The list was
//! made from what node, python (pip, uv), git, shells and native servers
//! call doing their normal work (`tests/sandbox/allowlist.rs` runs them
//! under it and checks nothing they need is refused), and from what they
//! must not:
//! the explicit refusals at the end say why for the calls a reader would
//! look for.

#![allow(non_upper_case_globals)]

use super::{Action, Clause, Cond, FilterPolicy, Listen, Rule, locks};

/// One listed system call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Its number on this architecture.
    pub nr: i64,
    /// Its name.
    pub name: &'static str,
    /// The named group it is allowed in (`"descriptors"`, `"files"`, ...,
    /// printed as `@descriptors`), or `""` for a call with a rule of its
    /// own (argument checks, the supervisor, a refusal).
    pub group: &'static str,
    /// Why it is allowed (or refused).
    pub why: &'static str,
    /// How it is treated.
    pub rule: Rule,
    /// A refusal that is part of normal work (a call libc and runtimes try
    /// and then fall back from): never reported.
    pub quiet: bool,
}

fn name(path: &'static str) -> &'static str {
    path.rsplit("SYS_").next().unwrap_or(path)
}

macro_rules! calls {
    ($rule:expr, $group:literal, $why:expr; $($nr:path),+ $(,)?) => {
        [$( Entry {
            nr: $nr as i64,
            name: name(stringify!($nr)),
            group: $group,
            why: $why,
            rule: $rule,
            quiet: false,
        } ),+]
    };
}

// Calls newer than the `libc` crate's tables (the same number on every
// architecture since Linux 5.1's unified numbering).
const SYS_cachestat: i64 = 451;
const SYS_map_shadow_stack: i64 = 453;
const SYS_futex_wake: i64 = 454;
const SYS_futex_wait: i64 = 455;
const SYS_futex_requeue: i64 = 456;
const SYS_statmount: i64 = 457;
const SYS_listmount: i64 = 458;
const SYS_setxattrat: i64 = 463;
const SYS_getxattrat: i64 = 464;
const SYS_listxattrat: i64 = 465;
const SYS_removexattrat: i64 = 466;
const SYS_open_tree_attr: i64 = 467;
const SYS_file_getattr: i64 = 468;
const SYS_file_setattr: i64 = 469;
/// x86_64 only: the kernel's return-probe trampoline calls it.
#[cfg(target_arch = "x86_64")]
const SYS_uretprobe: i64 = 335;

/// Set-user-ID and set-group-ID mode bits.
const SETID: u32 = libc::S_ISUID | libc::S_ISGID;
/// The open flags that create a file (`O_TMPFILE` without `O_DIRECTORY`).
const CREATES: u32 = (libc::O_CREAT | (libc::O_TMPFILE & !libc::O_DIRECTORY)) as u32;
/// `clone`/`unshare` flags that make a namespace. (`CLONE_NEWTIME` shares
/// its bit with `clone()`'s exit signal; it is checked for `unshare`.)
const NEW_NAMESPACES: u32 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWCGROUP
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET) as u32;
const CLONE_NEWTIME: u32 = 0x80;
/// `close_range()`'s flag that unshares the descriptor table first.
const CLOSE_RANGE_UNSHARE: u32 = 2;
const SOCK_TYPE_MASK: u32 = 0xf;
const IPPROTO_TCP: u32 = 6;
const NETLINK_ROUTE: u32 = 0;

/// `ioctl` requests a server may make: terminals (its own ptys), socket
/// and file queries, reflink copies. Everything else (`TIOCSTI`,
/// `FS_IOC_SETFLAGS`, device control) is refused.
const IOCTLS: &[u32] = &[
    // Terminals: isatty, window size, modes, job control, ptys.
    0x5401,      // TCGETS
    0x5402,      // TCSETS
    0x5403,      // TCSETSW
    0x5404,      // TCSETSF
    0x5409,      // TCSBRK (tcdrain)
    0x540A,      // TCXONC
    0x540B,      // TCFLSH
    0x540C,      // TIOCEXCL
    0x540D,      // TIOCNXCL
    0x540E,      // TIOCSCTTY (a pty the server opened)
    0x540F,      // TIOCGPGRP
    0x5410,      // TIOCSPGRP
    0x5411,      // TIOCOUTQ
    0x5413,      // TIOCGWINSZ
    0x5414,      // TIOCSWINSZ
    0x541B,      // FIONREAD
    0x5421,      // FIONBIO
    0x5422,      // TIOCNOTTY
    0x5429,      // TIOCGSID
    0x802C_542A, // TCGETS2
    0x402C_542B, // TCSETS2
    0x402C_542C, // TCSETSW2
    0x402C_542D, // TCSETSF2
    0x8004_5430, // TIOCGPTN
    0x4004_5431, // TIOCSPTLCK
    0x5441,      // TIOCGPTPEER
    0x5450,      // FIONCLEX
    0x5451,      // FIOCLEX
    0x5452,      // FIOASYNC
    0x5460,      // FIOQSIZE
    // Sockets: interface queries (read only), out-of-band mark.
    0x8905, // SIOCATMARK
    0x8910, // SIOCGIFNAME
    0x8912, // SIOCGIFCONF
    0x8913, // SIOCGIFFLAGS
    0x8915, // SIOCGIFADDR
    0x891B, // SIOCGIFNETMASK
    0x8921, // SIOCGIFMTU
    0x8927, // SIOCGIFHWADDR
    0x8933, // SIOCGIFINDEX
    // Files: read flags, block size, extent map; reflink copies.
    0x8008_6601, // FS_IOC_GETFLAGS
    0x801C_581F, // FS_IOC_FSGETXATTR
    0x0000_0002, // FIGETBSZ
    0xC020_660B, // FS_IOC_FIEMAP
    0x4004_9409, // FICLONE
    0x4020_940D, // FICLONERANGE
    0xC018_9436, // FIDEDUPERANGE
];

/// `ioctl` requests refused with `EPERM` (a refusal, not "not a terminal"):
/// typing into a terminal, the console, inode flags.
const IOCTLS_REFUSED: &[u32] = &[
    0x5412,      // TIOCSTI
    0x541C,      // TIOCLINUX
    0x4008_6602, // FS_IOC_SETFLAGS
    0x401C_5820, // FS_IOC_FSSETXATTR
];

/// `prctl` options a server may use: its own name, signals, dumpability,
/// capabilities it can only drop, no-new-privileges, timer slack, THP,
/// speculation control, anonymous memory names, memory-deny-write-execute.
const PRCTLS: &[u32] = &[
    1,           // PR_SET_PDEATHSIG
    2,           // PR_GET_PDEATHSIG
    3,           // PR_GET_DUMPABLE
    4,           // PR_SET_DUMPABLE
    7,           // PR_GET_KEEPCAPS
    8,           // PR_SET_KEEPCAPS
    15,          // PR_SET_NAME
    16,          // PR_GET_NAME
    21,          // PR_GET_SECCOMP
    22,          // PR_SET_SECCOMP
    23,          // PR_CAPBSET_READ
    24,          // PR_CAPBSET_DROP
    27,          // PR_GET_SECUREBITS
    29,          // PR_SET_TIMERSLACK
    30,          // PR_GET_TIMERSLACK
    36,          // PR_SET_CHILD_SUBREAPER
    37,          // PR_GET_CHILD_SUBREAPER
    38,          // PR_SET_NO_NEW_PRIVS
    39,          // PR_GET_NO_NEW_PRIVS
    40,          // PR_GET_TID_ADDRESS
    41,          // PR_SET_THP_DISABLE
    42,          // PR_GET_THP_DISABLE
    45,          // PR_SET_FP_MODE
    46,          // PR_GET_FP_MODE
    47,          // PR_CAP_AMBIENT
    50,          // PR_SVE_SET_VL
    51,          // PR_SVE_GET_VL
    52,          // PR_GET_SPECULATION_CTRL
    53,          // PR_SET_SPECULATION_CTRL
    65,          // PR_SET_MDWE
    66,          // PR_GET_MDWE
    0x4155_5856, // PR_GET_AUXV
    0x5356_4d41, // PR_SET_VMA
];

/// `personality` values: Linux, its 32-bit variant, `UNAME26`, and the
/// query. (`ADDR_NO_RANDOMIZE` and `READ_IMPLIES_EXEC` are refused.)
const PERSONALITIES: &[u32] = &[0, 0x0008, 0x0002_0000, 0x0002_0008, 0xffff_ffff];

/// `fcntl` commands refused: signals to another process (`F_SETOWN`,
/// `F_SETOWN_EX`, `F_SETSIG`) and leases (which make other processes'
/// opens of a file wait).
const FCNTL_REFUSED: &[u32] = &[8, 15, 10, 1024];

fn args(clauses: Vec<Clause>, otherwise: Action) -> Rule {
    Rule::Args { clauses, otherwise }
}

fn when(when: Vec<Cond>, then: Action) -> Clause {
    Clause { when, then }
}

fn one(nr: i64, name: &'static str, why: &'static str, rule: Rule) -> Entry {
    Entry {
        nr,
        name,
        group: "",
        why,
        rule,
        quiet: false,
    }
}

const EPERM: Action = Action::Errno(libc::EPERM);

/// Creation with set-id bits in the mode argument `mode` refused (the
/// umask never clears them); `flags`, when given, must create.
fn creation(mode: u8, flags: Option<u8>) -> Rule {
    let mut w = vec![Cond::AnySet(mode, SETID)];
    if let Some(f) = flags {
        w.insert(0, Cond::AnySet(f, CREATES));
    }
    args(vec![when(w, EPERM)], Action::Allow)
}

/// `open` and `openat` (mode argument `mode`, flags `flags`): creation
/// with set-id bits refused; with the server's own `/dev/shm` without
/// namespaces ([`super::shm`]), every open that creates, writes or does
/// not follow a last link (as `shm_open` and `sem_open` always open)
/// goes to the supervisor, the plain reads (most opens) not.
fn open(p: &FilterPolicy, mode: u8, flags: u8) -> Rule {
    let mut clauses = vec![when(
        vec![Cond::AnySet(flags, CREATES), Cond::AnySet(mode, SETID)],
        EPERM,
    )];
    if p.shm {
        let named = (libc::O_CREAT | libc::O_NOFOLLOW | libc::O_ACCMODE) as u32;
        clauses.push(when(vec![Cond::AnySet(flags, named)], Action::Supervise));
    }
    args(clauses, Action::Allow)
}

/// `chmod` to a set-id mode refused (a set-user-ID file in a root runs
/// with its owner's rights outside), and without the view to a
/// world-writable one too: then a server running as root owns every
/// root-owned file, including those outside the sandbox it may only read
/// (Landlock does not rule on metadata; the view mounts them read-only).
fn chmod(p: &FilterPolicy, mode: u8) -> Rule {
    let refused = if p.namespaces {
        SETID
    } else {
        SETID | libc::S_IWOTH
    };
    args(
        vec![when(vec![Cond::AnySet(mode, refused)], EPERM)],
        Action::Allow,
    )
}

/// Allowed on the calling process (argument `arg` zero) only, unless the
/// server has its own PID namespace.
fn own_process(p: &FilterPolicy, arg: u8) -> Rule {
    if p.namespaces {
        Rule::Allow
    } else {
        args(vec![when(vec![Cond::Eq(arg, 0)], Action::Allow)], EPERM)
    }
}

fn socket_rule(p: &FilterPolicy) -> Rule {
    let af = |v: i32| v as u32;
    let mut clauses = Vec::new();
    if !p.deny_unix {
        clauses.push(when(
            vec![
                Cond::Eq(0, af(libc::AF_UNIX)),
                Cond::MaskedIn(
                    1,
                    SOCK_TYPE_MASK,
                    vec![
                        libc::SOCK_STREAM as u32,
                        libc::SOCK_DGRAM as u32,
                        libc::SOCK_SEQPACKET as u32,
                    ],
                ),
            ],
            Action::Allow,
        ));
    }
    if !p.deny_inet {
        for inet in [libc::AF_INET, libc::AF_INET6] {
            // TCP (MPTCP and SCTP would slip past Landlock's TCP rules).
            clauses.push(when(
                vec![
                    Cond::Eq(0, af(inet)),
                    Cond::MaskedIn(1, SOCK_TYPE_MASK, vec![libc::SOCK_STREAM as u32]),
                    Cond::In(2, vec![0, IPPROTO_TCP]),
                ],
                Action::Allow,
            ));
            if p.udp {
                clauses.push(when(
                    vec![
                        Cond::Eq(0, af(inet)),
                        Cond::MaskedIn(
                            1,
                            SOCK_TYPE_MASK,
                            vec![libc::SOCK_DGRAM as u32, libc::SOCK_RAW as u32],
                        ),
                    ],
                    Action::Allow,
                ));
            }
        }
    }
    // Route netlink: what getaddrinfo (AI_ADDRCONFIG) and getifaddrs read.
    clauses.push(when(
        vec![
            Cond::Eq(0, af(libc::AF_NETLINK)),
            Cond::Eq(2, NETLINK_ROUTE),
        ],
        Action::Allow,
    ));
    args(clauses, EPERM)
}

fn socketpair_rule(p: &FilterPolicy) -> Rule {
    // Stream and seqpacket pairs are connected to each other only (a
    // runtime's internal pipes). A datagram pair's sendto() reaches any
    // pathname socket (and SOCK_RAW is a datagram pair for unix sockets).
    let mut types = vec![libc::SOCK_STREAM as u32, libc::SOCK_SEQPACKET as u32];
    if !p.deny_unix {
        types.push(libc::SOCK_DGRAM as u32);
    }
    args(
        vec![when(
            vec![
                Cond::Eq(0, libc::AF_UNIX as u32),
                Cond::MaskedIn(1, SOCK_TYPE_MASK, types),
            ],
            Action::Allow,
        )],
        EPERM,
    )
}

/// `MSG_FASTOPEN` refused in argument `flags`: a Fast Open send connects
/// without `connect()`, and Landlock's TCP connect rule does not see it.
fn no_fastopen(flags: u8) -> Rule {
    args(
        vec![when(
            vec![Cond::AnySet(flags, libc::MSG_FASTOPEN as u32)],
            EPERM,
        )],
        Action::Allow,
    )
}

/// The table for `p`.
pub fn entries(p: &FilterPolicy) -> Vec<Entry> {
    use Rule::{Allow, Refuse};
    let mut t: Vec<Entry> = Vec::with_capacity(400);

    t.extend(
        calls!(Allow, "descriptors", "read and write what the server holds";
            libc::SYS_read, libc::SYS_write, libc::SYS_readv, libc::SYS_writev,
            libc::SYS_pread64, libc::SYS_pwrite64, libc::SYS_preadv, libc::SYS_pwritev,
            libc::SYS_preadv2, libc::SYS_pwritev2, libc::SYS_close,
            libc::SYS_lseek, libc::SYS_dup, libc::SYS_dup3, libc::SYS_pipe2,
            libc::SYS_sendfile, libc::SYS_copy_file_range, libc::SYS_splice, libc::SYS_tee,
            libc::SYS_vmsplice, libc::SYS_fadvise64, libc::SYS_readahead,
            libc::SYS_fsync, libc::SYS_fdatasync, libc::SYS_sync_file_range, libc::SYS_syncfs,
            libc::SYS_sync, libc::SYS_ftruncate, libc::SYS_fallocate,
        ),
    );
    t.extend(
        calls!(Allow, "files", "paths are Landlock's (and the view's) to rule on";
            libc::SYS_newfstatat, libc::SYS_fstat, libc::SYS_statx,
            libc::SYS_statfs, libc::SYS_fstatfs, libc::SYS_faccessat, libc::SYS_faccessat2,
            libc::SYS_readlinkat, libc::SYS_getdents64, libc::SYS_getcwd, libc::SYS_chdir,
            libc::SYS_fchdir, libc::SYS_unlinkat, libc::SYS_renameat, libc::SYS_renameat2,
            libc::SYS_linkat, libc::SYS_symlinkat, libc::SYS_truncate, libc::SYS_utimensat,
            libc::SYS_getxattr, libc::SYS_lgetxattr, libc::SYS_fgetxattr, libc::SYS_listxattr,
            libc::SYS_llistxattr, libc::SYS_flistxattr, SYS_getxattrat, SYS_listxattrat,
            libc::SYS_inotify_rm_watch,
            libc::SYS_memfd_create, libc::SYS_umask,
        ),
    );
    t.push(if p.namespaces {
        Entry {
            group: "files",
            ..one(
                libc::SYS_inotify_add_watch,
                "inotify_add_watch",
                "paths are Landlock's (and the view's) to rule on",
                Allow,
            )
        }
    } else {
        one(
            libc::SYS_inotify_add_watch,
            "inotify_add_watch",
            "inotify watches: without a user namespace of its own the server's count against the user's limit, so the supervisor adds them, counts them and refuses one past a quarter of it (ENOSPC)",
            args(Vec::new(), Action::Supervise),
        )
    });
    let mut inotify = vec![(libc::SYS_inotify_init1, "inotify_init1")];
    #[cfg(target_arch = "x86_64")]
    inotify.push((libc::SYS_inotify_init, "inotify_init"));
    for (nr, name) in inotify {
        t.push(if p.namespaces {
            Entry {
                group: "files",
                ..one(nr, name, "paths are Landlock's (and the view's) to rule on", Allow)
            }
        } else {
            one(
                nr,
                name,
                "inotify instances: without a user namespace of its own the server's count against the user's limit, so the supervisor counts them and refuses one past a quarter of it (EMFILE)",
                args(Vec::new(), Action::Supervise),
            )
        });
    }
    t.extend(calls!(Allow, "memory", "the server's own address space";
        libc::SYS_brk, libc::SYS_mmap, libc::SYS_munmap, libc::SYS_mremap,
        libc::SYS_mprotect, libc::SYS_madvise, libc::SYS_msync, libc::SYS_mincore,
        libc::SYS_mlock, libc::SYS_mlock2, libc::SYS_munlock, libc::SYS_mlockall,
        libc::SYS_munlockall, libc::SYS_membarrier, libc::SYS_pkey_alloc,
        libc::SYS_pkey_free, libc::SYS_pkey_mprotect, libc::SYS_mseal,
        libc::SYS_get_mempolicy, libc::SYS_set_mempolicy, libc::SYS_mbind,
        libc::SYS_set_mempolicy_home_node, SYS_map_shadow_stack,
    ));
    t.extend(
        calls!(Allow, "threads", "threads and their synchronization";
            libc::SYS_set_tid_address, libc::SYS_set_robust_list, libc::SYS_get_robust_list,
            libc::SYS_rseq, libc::SYS_futex, libc::SYS_futex_waitv, SYS_futex_wake,
            SYS_futex_wait, SYS_futex_requeue, libc::SYS_exit, libc::SYS_exit_group,
            libc::SYS_restart_syscall, libc::SYS_sched_yield, libc::SYS_sched_getaffinity,
            libc::SYS_sched_getparam, libc::SYS_sched_getscheduler, libc::SYS_sched_getattr,
            libc::SYS_sched_get_priority_max, libc::SYS_sched_get_priority_min,
            libc::SYS_sched_rr_get_interval, libc::SYS_getcpu,
        ),
    );
    t.extend(calls!(Allow, "processes", "start, run and wait for its own (Landlock rules what it may execute)";
        libc::SYS_execve, libc::SYS_execveat, libc::SYS_wait4, libc::SYS_waitid,
        libc::SYS_pidfd_open,
    ));
    t.extend(calls!(Allow, "signals", "Landlock's scope (and the PID namespace) keeps them inside the sandbox";
        libc::SYS_rt_sigaction, libc::SYS_rt_sigprocmask, libc::SYS_rt_sigreturn,
        libc::SYS_rt_sigpending, libc::SYS_rt_sigtimedwait, libc::SYS_rt_sigsuspend,
        libc::SYS_rt_sigqueueinfo, libc::SYS_rt_tgsigqueueinfo, libc::SYS_sigaltstack,
        libc::SYS_kill, libc::SYS_tkill, libc::SYS_tgkill, libc::SYS_signalfd4,
        libc::SYS_pidfd_send_signal,
    ));
    t.extend(calls!(Allow, "time", "time and timers";
        libc::SYS_nanosleep, libc::SYS_clock_nanosleep, libc::SYS_clock_gettime,
        libc::SYS_clock_getres, libc::SYS_gettimeofday, libc::SYS_times,
        libc::SYS_getitimer, libc::SYS_setitimer, libc::SYS_timer_create,
        libc::SYS_timer_settime, libc::SYS_timer_gettime, libc::SYS_timer_getoverrun,
        libc::SYS_timer_delete, libc::SYS_timerfd_create, libc::SYS_timerfd_settime,
        libc::SYS_timerfd_gettime,
    ));
    t.extend(
        calls!(Allow, "identity", "without capabilities a server can only read or drop its own";
            libc::SYS_getpid, libc::SYS_getppid, libc::SYS_gettid, libc::SYS_getuid,
            libc::SYS_geteuid, libc::SYS_getgid, libc::SYS_getegid, libc::SYS_getresuid,
            libc::SYS_getresgid, libc::SYS_getgroups, libc::SYS_getpgid, libc::SYS_getsid,
            libc::SYS_setsid, libc::SYS_setpgid, libc::SYS_setuid, libc::SYS_setgid,
            libc::SYS_setreuid, libc::SYS_setregid, libc::SYS_setresuid, libc::SYS_setresgid,
            libc::SYS_setfsuid, libc::SYS_setfsgid, libc::SYS_setgroups, libc::SYS_capget,
            libc::SYS_capset,
        ),
    );
    t.extend(
        calls!(Allow, "system-facts", "system facts a runtime reads at start";
            libc::SYS_uname, libc::SYS_sysinfo, libc::SYS_getrandom, libc::SYS_getrlimit,
            libc::SYS_getrusage, libc::SYS_getpriority, libc::SYS_ioprio_get,
        ),
    );
    t.extend(calls!(Allow, "events", "waiting on what it holds";
        libc::SYS_ppoll, libc::SYS_pselect6, libc::SYS_epoll_create1, libc::SYS_epoll_ctl,
        libc::SYS_epoll_pwait, libc::SYS_epoll_pwait2, libc::SYS_eventfd2,
        libc::SYS_io_setup, libc::SYS_io_destroy, libc::SYS_io_submit,
        libc::SYS_io_getevents, libc::SYS_io_cancel,
    ));
    t.extend(calls!(Allow, "sockets", "sockets it holds (which sockets it may make is socket()'s rule; TCP ports are Landlock's)";
        libc::SYS_bind, libc::SYS_accept, libc::SYS_accept4,
        libc::SYS_getsockname, libc::SYS_getpeername, libc::SYS_getsockopt,
        libc::SYS_setsockopt, libc::SYS_recvfrom, libc::SYS_recvmsg,
        libc::SYS_recvmmsg, libc::SYS_shutdown,
    ));
    t.extend(
        calls!(Allow, "sandboxes", "sandboxes of its own: they can only restrict it further";
            libc::SYS_seccomp, libc::SYS_landlock_create_ruleset, libc::SYS_landlock_add_rule,
            libc::SYS_landlock_restrict_self,
        ),
    );

    #[cfg(target_arch = "x86_64")]
    {
        t.extend(
            calls!(Allow, "x86-64-legacy", "x86_64's older names of the calls above";
                libc::SYS_stat, libc::SYS_lstat, libc::SYS_access,
                libc::SYS_readlink, libc::SYS_getdents, libc::SYS_unlink, libc::SYS_rmdir,
                libc::SYS_rename, libc::SYS_link, libc::SYS_symlink, libc::SYS_utime,
                libc::SYS_utimes, libc::SYS_futimesat, libc::SYS_pipe, libc::SYS_dup2,
                libc::SYS_poll, libc::SYS_select, libc::SYS_epoll_create, libc::SYS_epoll_wait,
                libc::SYS_eventfd, libc::SYS_signalfd, libc::SYS_fork,
                libc::SYS_vfork, libc::SYS_time, libc::SYS_alarm, libc::SYS_pause,
                libc::SYS_getpgrp, libc::SYS_arch_prctl,
            ),
        );
        t.push(one(
            SYS_uretprobe,
            "uretprobe",
            "called only by the kernel's return-probe trampoline; refusing it would crash a probed server",
            Allow,
        ));
        t.push(one(
            libc::SYS_creat,
            "creat",
            "create a file, without set-id bits",
            creation(1, None),
        ));
        t.push(one(
            libc::SYS_mkdir,
            "mkdir",
            "make a directory, without set-id bits",
            creation(1, None),
        ));
        t.push(one(
            libc::SYS_mknod,
            "mknod",
            "make a FIFO or socket node, without set-id bits",
            creation(1, None),
        ));
        t.push(one(
            libc::SYS_chmod,
            "chmod",
            "change a mode, not to set-id (nor, without the view, world-writable)",
            chmod(p, 1),
        ));
    }

    // Argument-checked calls.
    t.push(one(
        libc::SYS_openat,
        "openat",
        "open files (Landlock rules the path); no set-id bits at creation",
        open(p, 3, 2),
    ));
    #[cfg(target_arch = "x86_64")]
    t.push(one(
        libc::SYS_open,
        "open",
        "open files (Landlock rules the path); no set-id bits at creation",
        open(p, 2, 1),
    ));
    t.push(one(
        libc::SYS_mkdirat,
        "mkdirat",
        "make a directory, without set-id bits",
        creation(2, None),
    ));
    t.push(one(
        libc::SYS_mknodat,
        "mknodat",
        "make a FIFO or socket node, without set-id bits",
        creation(2, None),
    ));
    t.push(one(
        libc::SYS_fchmod,
        "fchmod",
        "change a mode, not to set-id (nor, without the view, world-writable)",
        chmod(p, 1),
    ));
    t.push(one(
        libc::SYS_fchmodat,
        "fchmodat",
        "change a mode, not to set-id (nor, without the view, world-writable)",
        chmod(p, 2),
    ));
    t.push(one(
        libc::SYS_fchmodat2,
        "fchmodat2",
        "change a mode, not to set-id (nor, without the view, world-writable)",
        chmod(p, 2),
    ));
    t.push(one(libc::SYS_socket, "socket", "unix (where Landlock or the policy allows), TCP, UDP when the policy allows, route netlink", socket_rule(p)));
    t.push(one(
        libc::SYS_socketpair,
        "socketpair",
        "connected unix pairs: a runtime's internal pipes",
        socketpair_rule(p),
    ));
    t.push(one(
        libc::SYS_sendto,
        "sendto",
        "send on its sockets; no TCP Fast Open",
        no_fastopen(3),
    ));
    t.push(one(
        libc::SYS_sendmsg,
        "sendmsg",
        "send on its sockets; no TCP Fast Open",
        no_fastopen(2),
    ));
    t.push(one(
        libc::SYS_sendmmsg,
        "sendmmsg",
        "send on its sockets; no TCP Fast Open",
        no_fastopen(3),
    ));
    t.push(one(
        libc::SYS_connect,
        "connect",
        "to what Landlock allows (TCP by port, unix sockets by path); with network by domain and no namespaces of its own, to rootfence's proxy only, judged by the supervisor on the socket itself",
        if p.supervise_connect {
            args(Vec::new(), Action::Supervise)
        } else {
            Rule::Allow
        },
    ));
    t.push(one(
        libc::SYS_listen,
        "listen",
        "only on a socket bound to a granted port, or a unix socket (listen() on an unbound socket binds an ephemeral port Landlock does not see)",
        match p.listen {
            Listen::Refused => Refuse(libc::EPERM),
            Listen::Supervised => args(Vec::new(), Action::Supervise),
        },
    ));
    t.push(one(
        libc::SYS_ioctl,
        "ioctl",
        "terminal, socket and file queries, reflinks; no typing into terminals, no inode flags, no device control",
        args(
            vec![
                when(vec![Cond::In(1, IOCTLS_REFUSED.to_vec())], EPERM),
                when(vec![Cond::In(1, IOCTLS.to_vec())], Action::Allow),
            ],
            Action::Errno(libc::ENOTTY),
        ),
    ));
    t.push(one(
        libc::SYS_prctl,
        "prctl",
        "options on the process itself (its name, no-new-privileges, dropping capabilities, ...)",
        args(
            vec![when(vec![Cond::In(0, PRCTLS.to_vec())], Action::Allow)],
            Action::Errno(libc::EINVAL),
        ),
    ));
    t.push(one(
        libc::SYS_flock,
        "flock",
        "locks on files it opened for writing; on a file opened only for reading the lock is its own, judged by the supervisor on the descriptor itself (nothing outside waits)",
        if p.locks {
            args(
                vec![when(vec![Cond::AnySet(1, libc::LOCK_UN as u32)], Action::Allow)],
                Action::Supervise,
            )
        } else {
            Rule::Allow
        },
    ));
    let mut fcntl = vec![when(vec![Cond::In(1, FCNTL_REFUSED.to_vec())], EPERM)];
    if p.locks {
        fcntl.push(when(
            vec![Cond::In(
                1,
                vec![
                    locks::SETLK,
                    locks::SETLKW,
                    locks::OFD_SETLK,
                    locks::OFD_SETLKW,
                ],
            )],
            Action::Supervise,
        ));
    }
    t.push(one(
        libc::SYS_fcntl,
        "fcntl",
        "descriptor flags, and record locks as flock(); no signals to another process, no leases",
        args(fcntl, Action::Allow),
    ));
    t.push(one(
        libc::SYS_clone,
        "clone",
        "threads and processes; no new namespaces (a kernel surface no server needs), no descriptor table shared by two processes, nor two in one process (a lock the supervisor let through is watched in its process's one table)",
        args(
            vec![
                when(vec![Cond::AnySet(0, NEW_NAMESPACES)], EPERM),
                when(
                    vec![
                        Cond::AnySet(0, libc::CLONE_FILES as u32),
                        Cond::NoneSet(0, libc::CLONE_THREAD as u32),
                    ],
                    EPERM,
                ),
                when(
                    vec![
                        Cond::AnySet(0, libc::CLONE_THREAD as u32),
                        Cond::NoneSet(0, libc::CLONE_FILES as u32),
                    ],
                    EPERM,
                ),
            ],
            Action::Allow,
        ),
    ));
    // A thread that unshares its descriptors leaves its process with two
    // tables: with locks supervised, only where it is the process's only
    // thread (the supervisor looks; then nothing is left behind).
    let own_table = if p.locks {
        Action::Supervise
    } else {
        Action::Allow
    };
    t.push(one(
        libc::SYS_unshare,
        "unshare",
        "unsharing its own descriptors (in a process of one thread) or directory; no new namespaces",
        args(
            vec![
                when(
                    vec![Cond::AnySet(0, NEW_NAMESPACES | CLONE_NEWTIME)],
                    EPERM,
                ),
                when(vec![Cond::AnySet(0, libc::CLONE_FILES as u32)], own_table),
            ],
            Action::Allow,
        ),
    ));
    t.push(one(
        libc::SYS_close_range,
        "close_range",
        "closing its own descriptors; unsharing them (CLOSE_RANGE_UNSHARE) as unshare()",
        args(
            vec![when(vec![Cond::AnySet(2, CLOSE_RANGE_UNSHARE)], own_table)],
            Action::Allow,
        ),
    ));
    t.push(one(
        libc::SYS_personality,
        "personality",
        "reading it, or Linux's own; no disabling address randomization",
        args(
            vec![when(
                vec![Cond::In(0, PERSONALITIES.to_vec())],
                Action::Allow,
            )],
            EPERM,
        ),
    ));
    for (nr, name) in [
        (libc::SYS_prlimit64, "prlimit64"),
        (libc::SYS_sched_setaffinity, "sched_setaffinity"),
        (libc::SYS_sched_setscheduler, "sched_setscheduler"),
        (libc::SYS_sched_setparam, "sched_setparam"),
        (libc::SYS_sched_setattr, "sched_setattr"),
    ] {
        t.push(one(
            nr,
            name,
            "its own limits and scheduling (any process only inside its own PID namespace)",
            own_process(p, 0),
        ));
    }
    t.push(one(
        libc::SYS_setrlimit,
        "setrlimit",
        "its own limits (it can raise none above the hard limit rootfence set)",
        Allow,
    ));
    // (which, who): only "this process" (PRIO_PROCESS is 0 and
    // IOPRIO_WHO_PROCESS 1) with who 0, unless in its own PID namespace.
    for (nr, name, this) in [
        (libc::SYS_setpriority, "setpriority", 0),
        (libc::SYS_ioprio_set, "ioprio_set", 1),
    ] {
        let rule = if p.namespaces {
            Allow
        } else {
            args(
                vec![when(vec![Cond::Eq(0, this), Cond::Eq(1, 0)], Action::Allow)],
                EPERM,
            )
        };
        t.push(one(
            nr,
            name,
            "its own priority (any process only inside its own PID namespace)",
            rule,
        ));
    }
    let meta_why =
        "owners and extended attributes: the view keeps what is outside the roots read-only";
    let mut meta = vec![
        (libc::SYS_setxattr, "setxattr"),
        (libc::SYS_lsetxattr, "lsetxattr"),
        (libc::SYS_fsetxattr, "fsetxattr"),
        (libc::SYS_removexattr, "removexattr"),
        (libc::SYS_lremovexattr, "lremovexattr"),
        (libc::SYS_fremovexattr, "fremovexattr"),
        (SYS_setxattrat, "setxattrat"),
        (SYS_removexattrat, "removexattrat"),
        (libc::SYS_fchown, "fchown"),
        (libc::SYS_fchownat, "fchownat"),
    ];
    #[cfg(target_arch = "x86_64")]
    meta.extend([(libc::SYS_chown, "chown"), (libc::SYS_lchown, "lchown")]);
    for (nr, name) in meta {
        // Without the view nothing protects the metadata of files outside
        // the roots (a server running as root owns them all).
        t.push(one(
            nr,
            name,
            meta_why,
            if p.namespaces {
                Allow
            } else {
                Refuse(libc::EPERM)
            },
        ));
    }

    // Refused on purpose, quietly: libc and runtimes fall back.
    for (nr, name, why, errno) in [
        (
            libc::SYS_clone3,
            "clone3",
            "its flags are in memory the filter cannot read: libc falls back to clone()",
            libc::ENOSYS,
        ),
        (
            libc::SYS_openat2,
            "openat2",
            "its mode is in memory the filter cannot read: libraries fall back to openat()",
            libc::ENOSYS,
        ),
        (
            libc::SYS_io_uring_setup,
            "io_uring_setup",
            "io_uring makes sockets and opens files without the calls the filter checks: runtimes fall back to epoll and threads",
            libc::EPERM,
        ),
        (
            libc::SYS_io_uring_enter,
            "io_uring_enter",
            "io_uring (see io_uring_setup)",
            libc::EPERM,
        ),
        (
            libc::SYS_io_uring_register,
            "io_uring_register",
            "io_uring (see io_uring_setup)",
            libc::EPERM,
        ),
    ] {
        let mut e = one(nr, name, why, Refuse(errno));
        e.quiet = true;
        t.push(e);
    }

    // Refused on purpose, with EPERM: what a reader would look for.
    let refused: &[(i64, &str, &str)] = &[
        (libc::SYS_setns, "setns", "joining namespaces"),
        (
            libc::SYS_mount,
            "mount",
            "mounts: the view is built for the server",
        ),
        (libc::SYS_umount2, "umount2", "mounts"),
        (libc::SYS_pivot_root, "pivot_root", "mounts"),
        (libc::SYS_chroot, "chroot", "mounts"),
        (libc::SYS_fsopen, "fsopen", "mounts"),
        (libc::SYS_fsconfig, "fsconfig", "mounts"),
        (libc::SYS_fsmount, "fsmount", "mounts"),
        (libc::SYS_fspick, "fspick", "mounts"),
        (libc::SYS_move_mount, "move_mount", "mounts"),
        (libc::SYS_open_tree, "open_tree", "mounts"),
        (SYS_open_tree_attr, "open_tree_attr", "mounts"),
        (libc::SYS_mount_setattr, "mount_setattr", "mounts"),
        (SYS_statmount, "statmount", "the system's mounts"),
        (SYS_listmount, "listmount", "the system's mounts"),
        (
            libc::SYS_ptrace,
            "ptrace",
            "other processes' memory and registers",
        ),
        (
            libc::SYS_process_vm_readv,
            "process_vm_readv",
            "other processes' memory",
        ),
        (
            libc::SYS_process_vm_writev,
            "process_vm_writev",
            "other processes' memory",
        ),
        (
            libc::SYS_process_madvise,
            "process_madvise",
            "other processes' memory",
        ),
        (
            libc::SYS_process_mrelease,
            "process_mrelease",
            "other processes' memory",
        ),
        (
            libc::SYS_pidfd_getfd,
            "pidfd_getfd",
            "other processes' descriptors",
        ),
        (libc::SYS_kcmp, "kcmp", "other processes' kernel objects"),
        (
            libc::SYS_migrate_pages,
            "migrate_pages",
            "other processes' memory placement",
        ),
        (
            libc::SYS_move_pages,
            "move_pages",
            "other processes' memory placement",
        ),
        (
            libc::SYS_keyctl,
            "keyctl",
            "kernel keyrings (the session keyring is inherited from whoever started rootfence)",
        ),
        (libc::SYS_add_key, "add_key", "kernel keyrings"),
        (libc::SYS_request_key, "request_key", "kernel keyrings"),
        (
            libc::SYS_shmget,
            "shmget",
            "System V IPC: objects reached by key, not by path",
        ),
        (libc::SYS_shmat, "shmat", "System V IPC"),
        (libc::SYS_shmctl, "shmctl", "System V IPC"),
        (libc::SYS_shmdt, "shmdt", "System V IPC"),
        (libc::SYS_msgget, "msgget", "System V IPC"),
        (libc::SYS_msgsnd, "msgsnd", "System V IPC"),
        (libc::SYS_msgrcv, "msgrcv", "System V IPC"),
        (libc::SYS_msgctl, "msgctl", "System V IPC"),
        (libc::SYS_semget, "semget", "System V IPC"),
        (libc::SYS_semop, "semop", "System V IPC"),
        (libc::SYS_semtimedop, "semtimedop", "System V IPC"),
        (libc::SYS_semctl, "semctl", "System V IPC"),
        (
            libc::SYS_mq_open,
            "mq_open",
            "POSIX message queues: named objects, not paths",
        ),
        (libc::SYS_mq_unlink, "mq_unlink", "POSIX message queues"),
        (
            libc::SYS_mq_timedsend,
            "mq_timedsend",
            "POSIX message queues",
        ),
        (
            libc::SYS_mq_timedreceive,
            "mq_timedreceive",
            "POSIX message queues",
        ),
        (libc::SYS_mq_notify, "mq_notify", "POSIX message queues"),
        (
            libc::SYS_mq_getsetattr,
            "mq_getsetattr",
            "POSIX message queues",
        ),
        (libc::SYS_bpf, "bpf", "kernel programs"),
        (
            libc::SYS_perf_event_open,
            "perf_event_open",
            "kernel tracing",
        ),
        (
            libc::SYS_fanotify_init,
            "fanotify_init",
            "watching the whole filesystem",
        ),
        (
            libc::SYS_userfaultfd,
            "userfaultfd",
            "a kernel-exploitation primitive no server needs",
        ),
        (
            libc::SYS_name_to_handle_at,
            "name_to_handle_at",
            "file handles bypass path rules",
        ),
        (
            libc::SYS_open_by_handle_at,
            "open_by_handle_at",
            "file handles bypass path rules",
        ),
        (SYS_file_getattr, "file_getattr", "inode flags"),
        (
            SYS_file_setattr,
            "file_setattr",
            "inode flags (nodump, immutable, sync) on files it may only read",
        ),
        (
            SYS_cachestat,
            "cachestat",
            "page cache state of files (a side channel)",
        ),
        (libc::SYS_sethostname, "sethostname", "the machine's names"),
        (
            libc::SYS_setdomainname,
            "setdomainname",
            "the machine's names",
        ),
        (
            libc::SYS_settimeofday,
            "settimeofday",
            "the machine's clock",
        ),
        (
            libc::SYS_clock_settime,
            "clock_settime",
            "the machine's clock",
        ),
        (
            libc::SYS_clock_adjtime,
            "clock_adjtime",
            "the machine's clock",
        ),
        (libc::SYS_adjtimex, "adjtimex", "the machine's clock"),
        (libc::SYS_reboot, "reboot", "the machine"),
        (libc::SYS_kexec_load, "kexec_load", "the machine"),
        (libc::SYS_kexec_file_load, "kexec_file_load", "the machine"),
        (libc::SYS_init_module, "init_module", "kernel modules"),
        (libc::SYS_finit_module, "finit_module", "kernel modules"),
        (libc::SYS_delete_module, "delete_module", "kernel modules"),
        (libc::SYS_swapon, "swapon", "the machine's swap"),
        (libc::SYS_swapoff, "swapoff", "the machine's swap"),
        (libc::SYS_acct, "acct", "process accounting"),
        (libc::SYS_quotactl, "quotactl", "disk quotas"),
        (libc::SYS_quotactl_fd, "quotactl_fd", "disk quotas"),
        (libc::SYS_syslog, "syslog", "the kernel log"),
        (libc::SYS_vhangup, "vhangup", "terminals"),
        (
            libc::SYS_memfd_secret,
            "memfd_secret",
            "memory hidden from the kernel's own checks",
        ),
        (
            libc::SYS_remap_file_pages,
            "remap_file_pages",
            "deprecated, no server needs it",
        ),
    ];
    for (nr, name, why) in refused {
        t.push(one(*nr, name, why, Refuse(libc::EPERM)));
    }
    #[cfg(target_arch = "x86_64")]
    for (nr, name, why) in [
        (libc::SYS_modify_ldt, "modify_ldt", "x86 segment tables"),
        (libc::SYS_iopl, "iopl", "I/O ports"),
        (libc::SYS_ioperm, "ioperm", "I/O ports"),
    ] {
        t.push(one(nr, name, why, Refuse(libc::EPERM)));
    }
    t
}

/// The table by name, as `explain` prints it (as `systemd-analyze
/// syscall-filter` prints systemd's groups).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Groups {
    /// The named groups of calls allowed whatever their arguments.
    pub allowed: Vec<Group>,
    /// Calls with a rule of their own (argument checks, the supervisor),
    /// each with why.
    pub checked: Vec<(&'static str, &'static str)>,
    /// Calls refused on purpose, gathered by why.
    pub refused: Vec<Group>,
}

/// One named group of calls.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Group {
    /// Its name (`descriptors`; refusals: empty).
    pub name: &'static str,
    /// Why.
    pub why: &'static str,
    /// The calls, in the table's order.
    pub calls: Vec<&'static str>,
}

/// The table for `p`, by group.
pub fn groups(p: &FilterPolicy) -> Groups {
    let mut g = Groups::default();
    for e in entries(p) {
        match (&e.rule, e.group) {
            (Rule::Refuse(_), _) => match g.refused.iter_mut().find(|r| r.why == e.why) {
                Some(r) => r.calls.push(e.name),
                None => g.refused.push(Group {
                    name: "",
                    why: e.why,
                    calls: vec![e.name],
                }),
            },
            (Rule::Allow, name) if !name.is_empty() => {
                match g.allowed.iter_mut().find(|a| a.name == name) {
                    Some(a) => a.calls.push(e.name),
                    None => g.allowed.push(Group {
                        name,
                        why: e.why,
                        calls: vec![e.name],
                    }),
                }
            }
            _ => g.checked.push((e.name, e.why)),
        }
    }
    g
}
