//! The supervisor: rootfence's answer to the calls the filter hands it
//! (`SECCOMP_RET_USER_NOTIF`).
//!
//! - `listen()`: the filter cannot see whether a socket is bound. The
//!   supervisor takes a copy of the socket itself (`pidfd_getfd`), checks
//!   it (a unix socket, or TCP bound to a port the plan grants), and then
//!   calls `listen()` on that very socket, so the server cannot swap the
//!   descriptor between the check and the call. An unbound TCP socket
//!   (whose `listen()` would bind an ephemeral port on every address) is
//!   refused with `EPERM`.
//! - In report mode, every refusal: recorded (the call, its reason, how
//!   often) and answered with the filter's own errno.
//!
//! One thread per supervised server; it ends when no process uses the
//! filter any more (the listener reports a hang-up).

use std::collections::BTreeMap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::{Action, Entry, decide};

/// A call the filter refused while reporting was on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The call's name (`#NR` when the table does not list it).
    pub name: String,
    /// The arguments the decision turned on (`socket(AF_UNIX, SOCK_STREAM)`,
    /// `ioctl(0x5412)`), or the name alone for a call refused whatever its
    /// arguments.
    pub call: String,
    /// Why it is refused.
    pub why: String,
    /// The errno the server got.
    pub errno: i32,
    /// How many times.
    pub count: u64,
}

/// What the supervisor knows of the plan.
#[derive(Debug, Clone)]
pub struct Rules {
    /// The filter's table (for decisions and reasons).
    pub table: Vec<Entry>,
    /// TCP ports the server may listen on.
    pub tcp_bind: Vec<u16>,
}

/// A running supervisor.
#[derive(Debug)]
pub struct Supervisor {
    stop: Arc<AtomicBool>,
    refused: Arc<Mutex<BTreeMap<String, Refused>>>,
}

impl Supervisor {
    /// Serve the filter's `listener` on a thread of its own.
    pub fn start(listener: OwnedFd, rules: Rules) -> io::Result<Supervisor> {
        let stop = Arc::new(AtomicBool::new(false));
        let refused = Arc::new(Mutex::new(BTreeMap::new()));
        let (s, r) = (stop.clone(), refused.clone());
        std::thread::Builder::new()
            .name("rootfence-supervisor".into())
            .spawn(move || serve(&listener, &rules, &s, &r))?;
        Ok(Supervisor { stop, refused })
    }

    /// The calls refused so far (report mode), by name.
    pub fn refused(&self) -> Vec<Refused> {
        self.refused
            .lock()
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn serve(
    listener: &OwnedFd,
    rules: &Rules,
    stop: &AtomicBool,
    refused: &Mutex<BTreeMap<String, Refused>>,
) {
    let fd = listener.as_raw_fd();
    while !stop.load(Ordering::Relaxed) {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd on the stack.
        let n = unsafe { libc::poll(&mut p, 1, 500) };
        if n < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        if n == 0 {
            continue;
        }
        if p.revents & libc::POLLIN != 0 {
            // SAFETY: seccomp_notif is plain data; zeroed is what RECV
            // requires.
            let mut notif: libc::seccomp_notif = unsafe { std::mem::zeroed() };
            // SAFETY: the ioctl fills the struct on the stack.
            let r = unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_RECV, &mut notif) };
            if r < 0 {
                // ENOENT: the caller went away (a signal) before we read it.
                continue;
            }
            let (val, error) = answer(fd, &notif, rules, refused);
            let mut resp = libc::seccomp_notif_resp {
                id: notif.id,
                val,
                error,
                flags: 0,
            };
            // SAFETY: the ioctl reads the struct on the stack. A failure
            // (ENOENT) means the caller is gone.
            unsafe {
                libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_SEND, &mut resp);
            }
        } else if p.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
            return;
        }
    }
}

/// The return value and negative errno for one notification.
fn answer(
    listener: RawFd,
    n: &libc::seccomp_notif,
    rules: &Rules,
    refused: &Mutex<BTreeMap<String, Refused>>,
) -> (i64, i32) {
    let nr = i64::from(n.data.nr);
    let args = n.data.args;
    let d = decide(&rules.table, nr, &args);
    match d.action {
        Action::Supervise if nr == libc::SYS_listen => {
            match supervised_listen(listener, n, rules) {
                Ok(()) => (0, 0),
                Err(e) => (0, -e),
            }
        }
        Action::Supervise | Action::Allow => (0, -libc::EPERM),
        Action::Errno(errno) => {
            let name = d
                .entry
                .map_or_else(|| format!("#{nr}"), |e| e.name.to_string());
            let call = describe(&name, nr, &args, d.entry);
            if let Ok(mut m) = refused.lock() {
                let r = m.entry(call.clone()).or_insert_with(|| {
                    let why = d
                        .entry
                        .map_or("not on rootfence's list of system calls", |e| e.why);
                    tracing::warn!(
                        "the server called {call}, which the sandbox refuses ({why}); it got {}",
                        io::Error::from_raw_os_error(errno)
                    );
                    Refused {
                        name: name.clone(),
                        call: call.clone(),
                        why: why.to_string(),
                        errno,
                        count: 0,
                    }
                });
                r.count += 1;
            }
            (0, -errno)
        }
    }
}

/// Take the socket the caller names, check it, and listen on it: `Ok`, or
/// the errno to answer.
fn supervised_listen(listener: RawFd, n: &libc::seccomp_notif, rules: &Rules) -> Result<(), i32> {
    let last = || {
        io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EPERM)
    };
    // SAFETY: pidfd_open with integer arguments; the result is checked.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, n.pid as libc::pid_t, 0) };
    if pidfd < 0 {
        return Err(libc::EPERM);
    }
    // SAFETY: a new descriptor we own.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as RawFd) };
    let target = n.data.args[0] as RawFd;
    // SAFETY: pidfd_getfd with integer arguments; the result is checked.
    let sock = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), target, 0) };
    if sock < 0 {
        let e = last();
        return Err(if e == libc::EBADF {
            libc::EBADF
        } else {
            libc::EPERM
        });
    }
    // SAFETY: a new descriptor we own.
    let sock = unsafe { OwnedFd::from_raw_fd(sock as RawFd) };
    // The pid still names the caller (it was not reused in between).
    let mut id = n.id;
    // SAFETY: the ioctl reads a u64 on the stack.
    if unsafe { libc::ioctl(listener, libc::SECCOMP_IOCTL_NOTIF_ID_VALID, &mut id) } < 0 {
        return Err(libc::EPERM);
    }
    // SAFETY: sockaddr_storage is plain data; getsockname fills it.
    let mut addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: valid pointers to the storage and its length.
    if unsafe { libc::getsockname(sock.as_raw_fd(), (&raw mut addr).cast(), &mut len) } < 0 {
        return Err(last());
    }
    let allowed = match i32::from(addr.ss_family) {
        libc::AF_UNIX => true,
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in.
            let a = unsafe { &*(&raw const addr).cast::<libc::sockaddr_in>() };
            let port = u16::from_be(a.sin_port);
            port != 0 && rules.tcp_bind.contains(&port)
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6.
            let a = unsafe { &*(&raw const addr).cast::<libc::sockaddr_in6>() };
            let port = u16::from_be(a.sin6_port);
            port != 0 && rules.tcp_bind.contains(&port)
        }
        _ => false,
    };
    if !allowed {
        return Err(libc::EPERM);
    }
    let backlog = n.data.args[1] as i32;
    // SAFETY: listen on a socket we hold a copy of.
    if unsafe { libc::listen(sock.as_raw_fd(), backlog) } < 0 {
        return Err(last());
    }
    Ok(())
}

/// The call as a reader would write it, with the arguments its rule
/// checks.
fn describe(name: &str, nr: i64, args: &[u64; 6], entry: Option<&Entry>) -> String {
    let a = |i: usize| args[i] as u32;
    if !entry.is_some_and(|e| matches!(e.rule, super::Rule::Args { .. })) {
        return name.to_string();
    }
    let family = |f: u32| match f as i32 {
        libc::AF_UNIX => "AF_UNIX".to_string(),
        libc::AF_INET => "AF_INET".to_string(),
        libc::AF_INET6 => "AF_INET6".to_string(),
        libc::AF_NETLINK => "AF_NETLINK".to_string(),
        libc::AF_PACKET => "AF_PACKET".to_string(),
        other => other.to_string(),
    };
    let kind = |t: u32| match (t & 0xf) as i32 {
        libc::SOCK_STREAM => "SOCK_STREAM".to_string(),
        libc::SOCK_DGRAM => "SOCK_DGRAM".to_string(),
        libc::SOCK_RAW => "SOCK_RAW".to_string(),
        libc::SOCK_SEQPACKET => "SOCK_SEQPACKET".to_string(),
        other => other.to_string(),
    };
    if nr == libc::SYS_socket || nr == libc::SYS_socketpair {
        return format!("{name}({}, {}, {})", family(a(0)), kind(a(1)), a(2));
    }
    // The arguments the rule looks at, by position.
    let mut used: Vec<u8> = Vec::new();
    if let Some(super::Rule::Args { clauses, .. }) = entry.map(|e| &e.rule) {
        for c in clauses {
            for w in &c.when {
                let (super::Cond::Eq(i, _)
                | super::Cond::In(i, _)
                | super::Cond::MaskedIn(i, _, _)
                | super::Cond::AnySet(i, _)
                | super::Cond::NoneSet(i, _)) = w;
                if !used.contains(i) {
                    used.push(*i);
                }
            }
        }
    }
    used.sort_unstable();
    // Modes read best in octal, requests and flags in hex.
    let modes = ["chmod", "mkdir", "mknod", "open", "creat"]
        .iter()
        .any(|m| name.contains(m));
    let shown: Vec<String> = used
        .iter()
        .map(|i| {
            let v = a(*i as usize);
            if modes {
                format!("arg{i}={v:#o}")
            } else {
                format!("arg{i}={v:#x}")
            }
        })
        .collect();
    format!("{name}({})", shown.join(", "))
}
