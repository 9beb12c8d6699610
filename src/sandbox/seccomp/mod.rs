//! The seccomp filter: an allow-list of system calls, refusing every call
//! it does not list.
//!
//! Landlock rules files (and TCP by port); it does not see sockets of other
//! kinds, metadata, ioctls, namespaces, the kernel's other interfaces, nor
//! the calls a future kernel adds. The filter closes those by listing what
//! servers need (node, python, uv, git, shells, native servers) and refusing
//! the rest:
//!
//! - a call the table ([`table::entries`]) does not list answers `ENOSYS`,
//!   as on a kernel that lacks it, so libraries fall back (a call a future
//!   kernel adds is refused until rootfence lists it);
//! - a listed call whose meaning depends on its arguments is checked on them
//!   (socket families and types, `ioctl` requests, `prctl` options, `clone`
//!   and `unshare` namespace flags, `personality`, `fcntl` commands, set-id
//!   modes at creation and `chmod`, `MSG_FASTOPEN`, process ids without a PID
//!   namespace), and refused with the errno a program expects there
//!   (`EPERM`, `ENOTTY` for an `ioctl`, `EINVAL` for a `prctl` option);
//! - calls whose arguments cannot be read (`clone3`, `openat2`: a struct in
//!   memory) answer `ENOSYS`, and libc and runtimes fall back to `clone`
//!   and `openat`, whose arguments can;
//! - `listen()`, when the plan binds a TCP port or allows unix sockets, goes
//!   to rootfence's supervisor ([`supervisor`]), which lets it through only
//!   on a socket bound to a granted port (or a unix socket);
//! - `connect()`, for network by domain without a network namespace of the
//!   server's own, goes to the supervisor too, which connects a TCP socket
//!   only to rootfence's network proxy;
//! - `flock()` and `fcntl()`'s record locks go to the supervisor, which
//!   locks a file only where the server opened it for writing ([`locks`]);
//! - without namespaces, the calls that open (but for plain reads), link,
//!   rename or remove a file go to the supervisor, which does them itself
//!   for a name in `/dev/shm` (the server's own there, [`shm`]) and lets
//!   every other go on to the kernel;
//! - while rootfence observes a server (`rootfence learn`), the calls that
//!   name a path ([`paths`]) go to the supervisor too, which records what
//!   the sandbox refuses and lets each call run as the kernel decides;
//! - x32 system calls answer `ENOSYS`, and a process of another
//!   architecture (i386 through `int 0x80`) is killed.
//!
//! [`decide`] is the filter's meaning as plain Rust; [`compile`] turns the
//! same table into the BPF program the kernel runs, and a test checks the
//! two agree.

mod bpf;
pub mod instances;
pub mod locks;
mod lockwatch;
mod notif;
pub mod observer;
pub mod paths;
pub mod shm;
pub mod supervisor;
mod table;
pub mod writable;

pub use table::{Entry, Group, Groups, entries, groups};

use crate::plan::NetworkPlan;
use bpf::{Asm, To};

use super::SandboxError;

/// `SECCOMP_RET_*` actions.
const RET_ALLOW: u32 = 0x7fff_0000;
const RET_ERRNO: u32 = 0x0005_0000;
const RET_USER_NOTIF: u32 = 0x7fc0_0000;
const RET_KILL_PROCESS: u32 = 0x8000_0000;

/// x32 system calls on x86_64 are the 64-bit numbers with this bit set.
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

/// What `listen()` gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listen {
    /// Refused: the plan binds no TCP port and allows no unix socket.
    Refused,
    /// Decided by rootfence's supervisor on the socket itself: allowed on a
    /// unix socket or a TCP socket bound to a granted port, refused on one
    /// never bound (whose `listen()` would bind an ephemeral port Landlock
    /// does not see).
    Supervised,
}

/// What the filter allows beyond its fixed list: the plan's network, the
/// kernel's Landlock, the server's namespaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FilterPolicy {
    /// Allow UDP, ICMP and other non-stream inet sockets.
    pub udp: bool,
    /// Refuse `socket(AF_UNIX, ...)` and datagram `socketpair()` (whose
    /// `sendto()` reaches any pathname socket): Landlock cannot rule on
    /// unix sockets before ABI 9.
    pub deny_unix: bool,
    /// Refuse every `AF_INET`/`AF_INET6` socket (Landlock < ABI 4 cannot
    /// rule on TCP ports).
    pub deny_inet: bool,
    /// What `listen()` gets.
    pub listen: Listen,
    /// The server has its own namespaces (PID, mount, IPC): the rules that
    /// stand in for them are not needed.
    pub namespaces: bool,
    /// Every refusal (but the quiet ones, see [`Entry::quiet`]) goes to the
    /// supervisor, which reports it, then answers as the filter would.
    pub report: bool,
    /// `connect()` goes to the supervisor, which connects TCP sockets only
    /// to rootfence's network proxy (network by domain without a network
    /// namespace of the server's own).
    pub supervise_connect: bool,
    /// The calls that name a path ([`paths::of`]; those that only look at
    /// it only with `namespaces`) go to the supervisor, which records the
    /// paths the sandbox refuses and lets every call run as the kernel
    /// decides (it grants nothing). Only while rootfence observes a
    /// server: each such call costs a round trip.
    pub observe: bool,
    /// `connect()` and a refused `socket()` go to the supervisor, which
    /// records a TCP connection to a port the plan does not grant and a
    /// refused UDP socket (a name lookup's first step), and lets each go
    /// on as the kernel and the filter decide. Cheap (these calls are
    /// few): `rootfence run` observes every server's network.
    pub observe_network: bool,
    /// `flock()` and `fcntl()`'s record locks go to the supervisor, which
    /// locks only files opened for writing ([`locks`]): a lock on a file
    /// the server may only read would make programs outside wait.
    pub locks: bool,
    /// The calls that open (but for plain reads), link, rename or remove a
    /// file ([`shm::claims`]) go to the supervisor, which does them for a name in `/dev/shm` in
    /// the server's own directory and lets every other go on (without
    /// namespaces, where no `/dev/shm` of its own can be mounted). Each
    /// such call costs a round trip.
    pub shm: bool,
}

impl FilterPolicy {
    /// The policy for `network` on a kernel with Landlock ABI `abi`, with
    /// or without the server's own namespaces.
    pub fn for_plan(network: &NetworkPlan, abi: u32, namespaces: bool) -> FilterPolicy {
        FilterPolicy {
            udp: network.udp,
            deny_unix: !network.unix_sockets && abi < 9,
            deny_inet: abi < 4,
            listen: if network.tcp_bind.is_empty() && !network.unix_sockets {
                Listen::Refused
            } else {
                Listen::Supervised
            },
            namespaces,
            report: false,
            supervise_connect: false,
            observe: false,
            observe_network: false,
            locks: true,
            shm: false,
        }
    }

    /// Whether a launch under this policy needs the supervisor (a listener
    /// for the filter's notifications).
    pub fn needs_supervisor(&self) -> bool {
        self.report
            || self.listen == Listen::Supervised
            || self.supervise_connect
            || self.observe
            || self.observe_network
            || self.locks
            || self.shm
    }
}

/// What the filter does with a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Run it.
    Allow,
    /// Fail it with this errno.
    Errno(i32),
    /// Ask the supervisor (`listen`).
    Supervise,
}

/// A condition on the low 32 bits of one argument.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cond {
    /// `arg == v`.
    Eq(u8, u32),
    /// `arg` is one of the values.
    In(u8, Vec<u32>),
    /// `arg & mask` is one of the values.
    MaskedIn(u8, u32, Vec<u32>),
    /// `arg & mask != 0`.
    AnySet(u8, u32),
    /// `arg & mask == 0`.
    NoneSet(u8, u32),
}

impl Cond {
    fn holds(&self, args: &[u64; 6]) -> bool {
        let a = |i: &u8| args[*i as usize] as u32;
        match self {
            Cond::Eq(i, v) => a(i) == *v,
            Cond::In(i, vs) => vs.contains(&a(i)),
            Cond::MaskedIn(i, m, vs) => vs.contains(&(a(i) & m)),
            Cond::AnySet(i, m) => a(i) & m != 0,
            Cond::NoneSet(i, m) => a(i) & m == 0,
        }
    }
}

/// Conditions that must all hold for `action`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Clause {
    /// The conditions.
    pub when: Vec<Cond>,
    /// The action when they hold.
    pub then: Action,
}

/// How a listed call is treated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Rule {
    /// Always allowed.
    Allow,
    /// Always refused with this errno.
    Refuse(i32),
    /// The first clause whose conditions hold decides; else `otherwise`.
    Args {
        /// The clauses, in order.
        clauses: Vec<Clause>,
        /// When none holds.
        otherwise: Action,
    },
}

/// The filter's decision on one call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision<'a> {
    /// What happens.
    pub action: Action,
    /// The table's entry for the call, `None` when it is not listed.
    pub entry: Option<&'a Entry>,
}

/// What the filter does with system call `nr` and its arguments: the
/// reference meaning of [`compile`]'s program (a test checks they agree).
pub fn decide<'a>(table: &'a [Entry], nr: i64, args: &[u64; 6]) -> Decision<'a> {
    let Some(entry) = table.iter().find(|e| e.nr == nr) else {
        return Decision {
            action: Action::Errno(libc::ENOSYS),
            entry: None,
        };
    };
    let action = match &entry.rule {
        Rule::Allow => Action::Allow,
        Rule::Refuse(e) => Action::Errno(*e),
        Rule::Args { clauses, otherwise } => clauses
            .iter()
            .find(|c| c.when.iter().all(|w| w.holds(args)))
            .map_or(*otherwise, |c| c.then),
    };
    Decision {
        action,
        entry: Some(entry),
    }
}

/// Why the seccomp filter could not be compiled.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FilterError {
    /// rootfence has no filter for the architecture it was built for.
    #[error("no seccomp filter for the {0} architecture")]
    Arch(&'static str),
    /// A system call number of the table does not fit the filter's word.
    #[error(transparent)]
    Number(#[from] std::num::TryFromIntError),
    /// The program could not be assembled.
    #[error(transparent)]
    Asm(#[from] bpf::AsmError),
}

/// The action word for `action` on `entry`'s call (`None`: unlisted).
fn word(p: &FilterPolicy, action: Action, entry: Option<&Entry>) -> u32 {
    match action {
        Action::Allow if p.observe && entry.is_some_and(|e| observed(p, e.nr)) => RET_USER_NOTIF,
        Action::Allow if p.shm && entry.is_some_and(|e| shm::claims_every(e.nr)) => RET_USER_NOTIF,
        Action::Allow
            if (p.observe || p.observe_network)
                && entry.is_some_and(|e| e.nr == libc::SYS_connect) =>
        {
            RET_USER_NOTIF
        }
        Action::Allow => RET_ALLOW,
        Action::Supervise => RET_USER_NOTIF,
        // A refused socket() while observing: a UDP socket is what a name
        // lookup opens first.
        Action::Errno(_)
            if (p.observe || p.observe_network)
                && entry.is_some_and(|e| e.nr == libc::SYS_socket) =>
        {
            RET_USER_NOTIF
        }
        Action::Errno(_) if p.report && !entry.is_some_and(|e| e.quiet) => RET_USER_NOTIF,
        Action::Errno(e) => RET_ERRNO | (e as u32 & 0xffff),
    }
}

/// Whether call `nr` goes to the supervisor while observing paths: a call
/// that names a path, but one that only looks at it (`stat`, `access`,
/// ...) only where the server has a view (without one nothing refuses it:
/// Landlock does not rule on metadata).
fn observed(p: &FilterPolicy, nr: i64) -> bool {
    paths::of(nr).is_some_and(|c| p.namespaces || c.op != paths::PathOp::Look)
}

/// The audit architecture of this build.
fn audit_arch() -> Result<u32, SandboxError> {
    match std::env::consts::ARCH {
        "x86_64" => Ok(0xc000_003e),
        "aarch64" => Ok(0xc000_00b7),
        other => Err(FilterError::Arch(other).into()),
    }
}

/// Compile the filter for `p`, for the architecture rootfence runs on.
pub fn compile(p: FilterPolicy) -> Result<Vec<libc::sock_filter>, SandboxError> {
    let table = entries(&p);
    compile_table(&p, &table)
}

/// [`compile`], once per process for each `p` (the program depends on `p`
/// and the table alone): a session's rebuilds reuse it.
pub fn compiled(p: FilterPolicy) -> Result<Vec<libc::sock_filter>, SandboxError> {
    type Programs = Vec<(FilterPolicy, Vec<libc::sock_filter>)>;
    static PROGRAMS: std::sync::Mutex<Programs> = std::sync::Mutex::new(Vec::new());
    if let Ok(done) = PROGRAMS.lock()
        && let Some((_, program)) = done.iter().find(|(q, _)| *q == p)
    {
        return Ok(program.clone());
    }
    let program = compile(p)?;
    if let Ok(mut done) = PROGRAMS.lock() {
        done.push((p, program.clone()));
    }
    Ok(program)
}

fn compile_table(
    p: &FilterPolicy,
    table: &[Entry],
) -> Result<Vec<libc::sock_filter>, SandboxError> {
    let mut a = Asm::default();
    let arch_ok = a.label();
    a.load(bpf::ARCH);
    a.jeq(audit_arch()?, To::Label(arch_ok), To::Next);
    a.ret(RET_KILL_PROCESS);
    a.place(arch_ok);
    a.load(bpf::NR);
    if cfg!(target_arch = "x86_64") {
        a.jge(X32_SYSCALL_BIT, To::Next, To::Skip(1));
        a.ret(word(p, Action::Errno(libc::ENOSYS), None));
    }
    // Calls checked on their arguments first: they are the ones the
    // kernel runs the program for (the verdict of every other call is
    // constant, and the kernel caches it for each number).
    let mut ordered: Vec<&Entry> = table.iter().collect();
    ordered.sort_by_key(|e| !matches!(e.rule, Rule::Args { .. }));
    let mut blocks = Vec::new();
    for e in ordered {
        let nr = u32::try_from(e.nr).map_err(FilterError::from)?;
        // Not this call: skip its one instruction.
        a.jeq(nr, To::Next, To::Skip(1));
        match &e.rule {
            Rule::Allow => a.ret(word(p, Action::Allow, Some(e))),
            Rule::Refuse(errno) => a.ret(word(p, Action::Errno(*errno), Some(e))),
            Rule::Args { .. } => {
                let l = a.label();
                a.ja(To::Label(l));
                blocks.push((l, e));
            }
        }
    }
    a.ret(word(p, Action::Errno(libc::ENOSYS), None));
    for (l, e) in blocks {
        a.place(l);
        let Rule::Args { clauses, otherwise } = &e.rule else {
            continue;
        };
        for c in clauses {
            let next = a.label();
            for cond in &c.when {
                emit_cond(&mut a, cond, next);
            }
            a.ret(word(p, c.then, Some(e)));
            a.place(next);
        }
        a.ret(word(p, *otherwise, Some(e)));
    }
    Ok(a.finish().map_err(FilterError::from)?)
}

/// Code that falls through when `c` holds and jumps to `fail` when not.
fn emit_cond(a: &mut Asm, c: &Cond, fail: usize) {
    let f = To::Label(fail);
    match c {
        Cond::Eq(i, v) => {
            a.load(bpf::arg_low(*i));
            a.jeq(*v, To::Next, f);
        }
        Cond::In(i, vs) | Cond::MaskedIn(i, _, vs) => {
            a.load(bpf::arg_low(*i));
            if let Cond::MaskedIn(_, m, _) = c {
                a.and(*m);
            }
            let ok = a.label();
            for v in vs {
                a.jeq(*v, To::Label(ok), To::Next);
            }
            a.ja(f);
            a.place(ok);
        }
        Cond::AnySet(i, m) => {
            a.load(bpf::arg_low(*i));
            a.jset(*m, To::Next, f);
        }
        Cond::NoneSet(i, m) => {
            a.load(bpf::arg_low(*i));
            a.jset(*m, f, To::Next);
        }
    }
}

#[cfg(test)]
mod tests;
