//! The seccomp filter that closes what Landlock does not cover.
//!
//! Landlock (up to ABI 8) rules TCP by port but not UDP, raw or other
//! socket families, and (before ABI 9) not connecting to pathname unix
//! sockets. The filter, compiled in the parent and loaded in the child,
//! refuses with `EPERM` (never kills):
//!
//! - `socket()` for every family but `AF_UNIX`, `AF_INET`, `AF_INET6` and
//!   `AF_NETLINK` (no `AF_PACKET`, `AF_VSOCK`, `AF_ALG`, bluetooth, ...);
//! - `AF_INET`/`AF_INET6` stream sockets with a protocol other than TCP
//!   (SCTP and MPTCP would slip past Landlock's TCP port rules);
//! - unless the plan allows UDP: `AF_INET`/`AF_INET6` sockets of any type
//!   but `SOCK_STREAM` (the `SOCK_NONBLOCK`/`SOCK_CLOEXEC` flags are masked);
//! - `AF_NETLINK` with a protocol other than `NETLINK_ROUTE`: route is what
//!   `getaddrinfo` (`AI_ADDRCONFIG`) and `getifaddrs` read; the server holds
//!   no capability to change routes or links, and the other families
//!   (sock_diag, audit, uevent, ...) are refused;
//! - unless the plan allows unix sockets and while Landlock cannot rule on
//!   them (ABI < 9): `socket(AF_UNIX, ...)`. `socketpair()` stays allowed,
//!   so runtimes keep their internal pipes (node and python use it);
//! - `io_uring_setup`, `io_uring_enter` and `io_uring_register`: io_uring
//!   can create sockets without the `socket()` system call. Runtimes fall
//!   back to epoll and threads;
//! - `sendto`, `sendmsg` and `sendmmsg` with `MSG_FASTOPEN`: a TCP Fast
//!   Open send connects without `connect()`, and Landlock's TCP connect
//!   rule does not see it (measured on Linux 6.18: the connection is made);
//! - `chmod`, `fchmod`, `fchmodat` and `fchmodat2` to a mode with the
//!   set-user-ID, set-group-ID or world-writable bit: Landlock does not
//!   rule on file metadata, and a server running as root owns (and so may
//!   chmod) every root-owned file on the system, including setuid
//!   candidates outside the sandbox;
//! - `keyctl`, `add_key` and `request_key`: the kernel keyrings (the
//!   session keyring is inherited from whoever started rootfence);
//! - on kernels without Landlock networking (ABI < 4): every `AF_INET` and
//!   `AF_INET6` socket;
//! - System V shared memory, message queues and semaphores, and POSIX
//!   message queues: objects reached by key or name, not by path;
//! - `bpf`, `perf_event_open`, `fanotify_init`;
//! - `listen()` when the plan binds no TCP port and allows no unix socket:
//!   `listen()` on a socket never bound binds an ephemeral TCP port, and
//!   Landlock's bind rule does not see it;
//! - unless the plan allows unix sockets: datagram `socketpair()` (its
//!   `sendto()` reaches any pathname socket, and `SCM_RIGHTS` across it);
//! - `ioctl(TIOCSTI)` and `ioctl(TIOCLINUX)`: typing into a terminal the
//!   server holds a descriptor of;
//! - without the server's own namespaces (the fallback): `prlimit64`,
//!   `sched_set*`, `migrate_pages` and `move_pages` on a pid other than 0,
//!   `setpriority` and `ioprio_set` other than on the calling process, the
//!   `setxattr`/`removexattr` family and the `chown` family (the PID
//!   namespace and the read-only view cover these when present);
//! - on x86_64, every x32 system call (so no rule can be bypassed through
//!   the x32 numbers).
//!
//! The filter checks the architecture first: a process of another
//! architecture (i386 through `int 0x80`) is killed.

use std::collections::BTreeMap;

use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

use super::SandboxError;
use crate::plan::NetworkPlan;

/// x32 system calls on x86_64 are the 64-bit numbers with this bit set.
const X32_SYSCALL_BIT: i64 = 0x4000_0000;

/// `fchmodat2` (Linux 6.6), on every architecture that has the generic
/// table number.
const FCHMODAT2: i64 = 452;
/// `setxattrat` and `removexattrat` (Linux 6.13).
const SETXATTRAT: i64 = 463;
const REMOVEXATTRAT: i64 = 466;
/// `ioctl` requests that push input into a terminal or drive a console.
const TIOCSTI: u64 = 0x5412;
const TIOCLINUX: u64 = 0x541C;

const IPPROTO_TCP: u64 = 6;
const NETLINK_ROUTE: u64 = 0;
const SOCK_TYPE_MASK: u64 = 0xf;
/// The flag bits `socket()` accepts in its type argument, in every
/// combination.
const STREAM_FLAG_COMBINATIONS: [i32; 4] = [
    0,
    libc::SOCK_NONBLOCK,
    libc::SOCK_CLOEXEC,
    libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
];

fn cond(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, SandboxError> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value).map_err(compile_err)
}

fn rule(conds: Vec<SeccompCondition>) -> Result<SeccompRule, SandboxError> {
    SeccompRule::new(conds).map_err(compile_err)
}

fn compile_err(e: impl std::fmt::Display) -> SandboxError {
    SandboxError::Seccomp(e.to_string())
}

/// What the filter refuses beyond what it always refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocketPolicy {
    /// Allow UDP, raw and other non-stream inet sockets.
    pub udp: bool,
    /// Refuse `socket(AF_UNIX, ...)` and datagram `socketpair()` (whose
    /// `sendto()` reaches any pathname socket).
    pub deny_unix: bool,
    /// Refuse every `AF_INET`/`AF_INET6` socket (Landlock < ABI 4 cannot
    /// rule on TCP ports).
    pub deny_inet: bool,
    /// Refuse `listen()`: nothing may listen when the plan binds no TCP
    /// port and allows no unix socket (`listen()` on a socket never bound
    /// binds a TCP port itself, and Landlock's bind rule does not see it).
    pub deny_listen: bool,
    /// The server has its own namespaces (PID, mount, IPC): the rules that
    /// stand in for them are not needed.
    pub namespaces: bool,
}

impl SocketPolicy {
    /// The policy for `network` on a kernel with Landlock ABI `abi`, with
    /// or without the server's own namespaces.
    pub fn for_plan(network: &NetworkPlan, abi: u32, namespaces: bool) -> SocketPolicy {
        SocketPolicy {
            udp: network.udp,
            deny_unix: !network.unix_sockets && abi < 9,
            deny_inet: abi < 4,
            deny_listen: network.tcp_bind.is_empty() && !network.unix_sockets,
            namespaces,
        }
    }
}

/// The rules that make `socket(domain, type, protocol)` fail.
fn socket_rules(p: SocketPolicy) -> Result<Vec<SeccompRule>, SandboxError> {
    use SeccompCmpOp::{Eq, MaskedEq, Ne};
    let af = |v: i32| u64::try_from(v).unwrap_or(u64::MAX);
    let mut rules = Vec::new();
    // Families other than the four below.
    rules.push(rule(vec![
        cond(0, Ne, af(libc::AF_UNIX))?,
        cond(0, Ne, af(libc::AF_INET))?,
        cond(0, Ne, af(libc::AF_INET6))?,
        cond(0, Ne, af(libc::AF_NETLINK))?,
    ])?);
    for inet in [libc::AF_INET, libc::AF_INET6] {
        // Stream sockets that are not TCP.
        rules.push(rule(vec![
            cond(0, Eq, af(inet))?,
            cond(1, MaskedEq(SOCK_TYPE_MASK), af(libc::SOCK_STREAM))?,
            cond(2, Ne, 0)?,
            cond(2, Ne, IPPROTO_TCP)?,
        ])?);
        if !p.udp {
            // Any type but SOCK_STREAM with or without the two flags the
            // kernel accepts (it refuses every other bit with EINVAL).
            let mut conds = vec![cond(0, Eq, af(inet))?];
            for flags in STREAM_FLAG_COMBINATIONS {
                conds.push(cond(1, Ne, af(libc::SOCK_STREAM | flags))?);
            }
            rules.push(rule(conds)?);
        }
    }
    rules.push(rule(vec![
        cond(0, Eq, af(libc::AF_NETLINK))?,
        cond(2, Ne, NETLINK_ROUTE)?,
    ])?);
    if p.deny_inet {
        for inet in [libc::AF_INET, libc::AF_INET6] {
            rules.push(rule(vec![cond(0, Eq, af(inet))?])?);
        }
    }
    if p.deny_unix {
        rules.push(rule(vec![cond(0, Eq, af(libc::AF_UNIX))?])?);
    }
    Ok(rules)
}

/// Compile the filter for `p`, for the architecture rootfence runs on.
pub fn compile(p: SocketPolicy) -> Result<Vec<libc::sock_filter>, SandboxError> {
    let arch = TargetArch::try_from(std::env::consts::ARCH).map_err(compile_err)?;
    let mut map: BTreeMap<i64, Vec<SeccompRule>> = BTreeMap::new();
    let mut calls = vec![(libc::SYS_socket, socket_rules(p)?)];
    for always in [
        libc::SYS_io_uring_setup,
        libc::SYS_io_uring_enter,
        libc::SYS_io_uring_register,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        // System V IPC and POSIX message queues: named objects of the IPC
        // namespace, reached without any path.
        libc::SYS_shmget,
        libc::SYS_shmat,
        libc::SYS_shmctl,
        libc::SYS_shmdt,
        libc::SYS_msgget,
        libc::SYS_msgsnd,
        libc::SYS_msgrcv,
        libc::SYS_msgctl,
        libc::SYS_semget,
        libc::SYS_semop,
        libc::SYS_semtimedop,
        libc::SYS_semctl,
        libc::SYS_mq_open,
        libc::SYS_mq_unlink,
        libc::SYS_mq_timedsend,
        libc::SYS_mq_timedreceive,
        libc::SYS_mq_notify,
        libc::SYS_mq_getsetattr,
        // Kernel interfaces no MCP server needs.
        libc::SYS_bpf,
        libc::SYS_perf_event_open,
        libc::SYS_fanotify_init,
    ] {
        calls.push((always, Vec::new()));
    }
    if p.deny_listen {
        calls.push((libc::SYS_listen, Vec::new()));
    }
    if p.deny_unix {
        let dgram = u64::try_from(libc::SOCK_DGRAM).unwrap_or(2);
        calls.push((
            libc::SYS_socketpair,
            vec![rule(vec![cond(
                1,
                SeccompCmpOp::MaskedEq(SOCK_TYPE_MASK),
                dgram,
            )?])?],
        ));
    }
    // Typing into a terminal the server holds (the user's, through an
    // inherited descriptor), or rewriting its console.
    calls.push((
        libc::SYS_ioctl,
        vec![
            rule(vec![cond(1, SeccompCmpOp::Eq, TIOCSTI)?])?,
            rule(vec![cond(1, SeccompCmpOp::Eq, TIOCLINUX)?])?,
        ],
    ));
    if !p.namespaces {
        // Without a PID namespace every process of the machine can be
        // named: no call may act on another process's limits, priority or
        // scheduling.
        for (nr, arg) in [
            (libc::SYS_prlimit64, 0),
            (libc::SYS_sched_setaffinity, 0),
            (libc::SYS_sched_setscheduler, 0),
            (libc::SYS_sched_setparam, 0),
            (libc::SYS_sched_setattr, 0),
            (libc::SYS_migrate_pages, 0),
            (libc::SYS_move_pages, 0),
        ] {
            calls.push((nr, vec![rule(vec![cond(arg, SeccompCmpOp::Ne, 0)?])?]));
        }
        for nr in [libc::SYS_setpriority, libc::SYS_ioprio_set] {
            // (which, who): only "this process" (PRIO_PROCESS is 0,
            // IOPRIO_WHO_PROCESS is 1) with who 0.
            let this = if nr == libc::SYS_setpriority { 0 } else { 1 };
            calls.push((
                nr,
                vec![
                    rule(vec![cond(0, SeccompCmpOp::Ne, this)?])?,
                    rule(vec![cond(1, SeccompCmpOp::Ne, 0)?])?,
                ],
            ));
        }
        // Without a read-only view, metadata of files outside the roots is
        // only protected this far: no extended attributes (POSIX ACLs are
        // one) and no change of owner anywhere.
        let mut meta = vec![
            libc::SYS_setxattr,
            libc::SYS_lsetxattr,
            libc::SYS_fsetxattr,
            libc::SYS_removexattr,
            libc::SYS_lremovexattr,
            libc::SYS_fremovexattr,
            SETXATTRAT,
            REMOVEXATTRAT,
            libc::SYS_fchown,
            libc::SYS_fchownat,
        ];
        #[cfg(target_arch = "x86_64")]
        meta.extend([libc::SYS_chown, libc::SYS_lchown]);
        for nr in meta {
            calls.push((nr, Vec::new()));
        }
    }
    // The flags argument of each send call.
    for (nr, flags_arg) in [
        (libc::SYS_sendto, 3),
        (libc::SYS_sendmsg, 2),
        (libc::SYS_sendmmsg, 3),
    ] {
        let bit = u64::try_from(libc::MSG_FASTOPEN).unwrap_or(0x2000_0000);
        calls.push((
            nr,
            vec![rule(vec![cond(
                flags_arg,
                SeccompCmpOp::MaskedEq(bit),
                bit,
            )?])?],
        ));
    }
    // The mode argument of each chmod call.
    let mut chmods = vec![
        (libc::SYS_fchmod, 1),
        (libc::SYS_fchmodat, 2),
        (FCHMODAT2, 2),
    ];
    #[cfg(target_arch = "x86_64")]
    chmods.push((libc::SYS_chmod, 1));
    for (nr, mode_arg) in chmods {
        let mut rules = Vec::new();
        for bit in [libc::S_ISUID, libc::S_ISGID, libc::S_IWOTH] {
            let bit = u64::from(bit);
            rules.push(rule(vec![cond(
                mode_arg,
                SeccompCmpOp::MaskedEq(bit),
                bit,
            )?])?);
        }
        calls.push((nr, rules));
    }
    for (nr, rules) in calls {
        map.insert(nr, rules);
    }
    let filter = SeccompFilter::new(
        map,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(compile_err)?;
    let prog: BpfProgram = filter.try_into().map_err(compile_err)?;
    let mut out = if arch == TargetArch::x86_64 {
        refuse_x32()
    } else {
        Vec::new()
    };
    out.extend(prog.into_iter().map(|i| libc::sock_filter {
        code: i.code,
        jt: i.jt,
        jf: i.jf,
        k: i.k,
    }));
    Ok(out)
}

/// A prologue refusing every x32 system call (x86_64 architecture, number
/// with the x32 bit) with `EPERM`, so that none of the rules above can be
/// bypassed through the x32 numbers. Other calls fall through to the
/// filter that follows (which checks the architecture again).
fn refuse_x32() -> Vec<libc::sock_filter> {
    const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
    const ARCH_OFFSET: u32 = 4; // offsetof(struct seccomp_data, arch)
    const NR_OFFSET: u32 = 0; // offsetof(struct seccomp_data, nr)
    let ins = |code: u32, jt: u8, jf: u8, k: u32| libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    };
    let ld_abs = libc::BPF_LD | libc::BPF_W | libc::BPF_ABS;
    vec![
        ins(ld_abs, 0, 0, ARCH_OFFSET),
        // Not x86_64: skip to the filter (3 instructions ahead).
        ins(
            libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K,
            0,
            3,
            AUDIT_ARCH_X86_64,
        ),
        ins(ld_abs, 0, 0, NR_OFFSET),
        // Below the x32 bit: skip the return.
        ins(
            libc::BPF_JMP | libc::BPF_JGE | libc::BPF_K,
            0,
            1,
            X32_SYSCALL_BIT as u32,
        ),
        ins(
            libc::BPF_RET | libc::BPF_K,
            0,
            0,
            libc::SECCOMP_RET_ERRNO | libc::EPERM as u32,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compiles_for_every_policy() {
        for udp in [false, true] {
            for deny_unix in [false, true] {
                for namespaces in [false, true] {
                    let prog = compile(SocketPolicy {
                        udp,
                        deny_unix,
                        deny_inet: deny_unix,
                        deny_listen: deny_unix,
                        namespaces,
                    })
                    .unwrap();
                    assert!(!prog.is_empty());
                    // BPF programs are limited to 4096 instructions. The
                    // kernel caches the verdict of every system call whose
                    // verdict does not depend on its arguments, so only
                    // the calls named here run through the program.
                    assert!(prog.len() < 600, "{} instructions", prog.len());
                }
            }
        }
    }
}
