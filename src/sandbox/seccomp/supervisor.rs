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
//! - `connect()` (network by domain without a network namespace of the
//!   server's own): the supervisor takes a copy of the socket. A TCP
//!   socket is connected by the supervisor itself, to its own copy of the
//!   address read once from the server's memory, and only when that is
//!   rootfence's network proxy; any other address is refused with
//!   `EACCES`. The server can change neither the address after the check
//!   nor the socket. A socket of another family (unix, netlink) is let
//!   through to the kernel: were a TCP socket swapped in under its number
//!   meanwhile, Landlock refuses its connect (it allows the server no TCP
//!   port on this rung).
//! - Without namespaces, the calls that open, link, rename or remove a
//!   file: a name in `/dev/shm` is done in the server's own directory
//!   ([`super::shm`]); any other path goes on to the kernel.
//! - In report mode, every refusal: recorded (the call, its reason, how
//!   often) and answered with the filter's own errno.
//! - While observing, every call that names a path: looked at by the
//!   [`super::observer`], which records what the sandbox refuses, and
//!   let through to the kernel, which decides (the supervisor grants
//!   nothing; see the observer's `# Security`).
//!
//! One thread per supervised server; it ends when no process uses the
//! filter any more (the listener reports a hang-up).

use std::collections::BTreeMap;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use super::locks;
use super::notif::{Answer, send, still_pending, take_fd};
use super::observer::{self, Observer};
use super::{Action, Entry, decide, paths};
use crate::sandbox::observed::Observed;

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
    /// The only address a supervised `connect()` reaches: rootfence's
    /// network proxy.
    pub proxy: Option<std::net::SocketAddr>,
    /// Observing the calls that name a path: what the observer knows of
    /// the sandbox, and its record.
    pub observe: Option<Arc<Observer>>,
    /// Report mode: every refusal the filter hands over is recorded and
    /// logged (else only observed).
    pub report: bool,
    /// The files the server may write, whose locks are real though it
    /// opened them only for reading (see [`locks`]).
    pub writable: super::writable::Writable,
    /// The server's own `/dev/shm` without namespaces ([`super::shm`]).
    pub shm: Option<Arc<super::shm::Shm>>,
}

/// A running supervisor.
#[derive(Debug)]
pub struct Supervisor {
    stop: Arc<AtomicBool>,
    refused: Arc<Mutex<BTreeMap<String, Refused>>>,
    observer: Option<Arc<Observer>>,
}

impl Supervisor {
    /// Serve the filter's `listener` on a thread of its own.
    pub fn start(listener: OwnedFd, rules: Rules) -> io::Result<Supervisor> {
        let stop = Arc::new(AtomicBool::new(false));
        let refused = Arc::new(Mutex::new(BTreeMap::new()));
        let (s, r) = (stop.clone(), refused.clone());
        let observer = rules.observe.clone();
        std::thread::Builder::new()
            .name("rootfence-supervisor".into())
            .spawn(move || serve(&Arc::new(listener), &rules, &s, &r))?;
        Ok(Supervisor {
            stop,
            refused,
            observer,
        })
    }

    /// The calls refused so far (report mode), by name.
    pub fn refused(&self) -> Vec<Refused> {
        self.refused
            .lock()
            .map(|m| m.values().cloned().collect())
            .unwrap_or_default()
    }

    /// What observing the server saw so far (the paths the sandbox
    /// refused it); `None` when not observing.
    pub fn observed(&self) -> Option<Observed> {
        self.observer.as_ref().map(|o| o.observed())
    }

    /// Each path the sandbox refuses the server, as it is seen (see
    /// [`Observer::watch`]); `None` when not observing.
    pub fn watch(&self) -> Option<std::sync::mpsc::Receiver<crate::sandbox::observed::Seen>> {
        self.observer.as_ref().map(|o| o.watch())
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn serve(
    listener: &Arc<OwnedFd>,
    rules: &Rules,
    stop: &AtomicBool,
    refused: &Mutex<BTreeMap<String, Refused>>,
) {
    let fd = listener.as_raw_fd();
    // A caller and the supervisor wake each other on the waker's CPU
    // (Linux 6.6), which makes a round trip several times shorter; an
    // older kernel refuses the flag and wakes as it always did.
    const SYNC_WAKE_UP: u64 = 1;
    // SAFETY: the ioctl reads the u64 flags it is given by value.
    unsafe { libc::ioctl(fd, libc::SECCOMP_IOCTL_NOTIF_SET_FLAGS, SYNC_WAKE_UP) };
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
            let a = answer(listener, &notif, rules, refused);
            send(fd, notif.id, a);
        } else if p.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0 {
            return;
        }
    }
}

/// The answer to one notification.
fn answer(
    shared: &Arc<OwnedFd>,
    n: &libc::seccomp_notif,
    rules: &Rules,
    refused: &Mutex<BTreeMap<String, Refused>>,
) -> Answer {
    let listener = shared.as_raw_fd();
    let nr = i64::from(n.data.nr);
    let args = n.data.args;
    let mut d = decide(&rules.table, nr, &args);
    // A name in the server's own /dev/shm; any other path the filter
    // handed over for it is allowed (and observed, while observing).
    if let Some(shm) = &rules.shm
        && super::shm::claims(nr)
        && matches!(d.action, Action::Allow | Action::Supervise)
    {
        if let Some(a) = super::shm::answer(listener, n, shm) {
            return a;
        }
        d.action = Action::Allow;
    }
    match d.action {
        Action::Supervise if nr == libc::SYS_listen => {
            match supervised_listen(listener, n, rules) {
                Ok(()) => Answer::Done(0, 0),
                Err(e) => Answer::Done(0, -e),
            }
        }
        Action::Supervise if nr == libc::SYS_flock || nr == libc::SYS_fcntl => {
            locks::answer(shared, n, &rules.writable)
        }
        Action::Supervise if nr == libc::SYS_inotify_init1 => {
            super::instances::answer(listener, n, args[0])
        }
        Action::Supervise if nr == libc::SYS_inotify_add_watch => {
            super::instances::add_watch(listener, n)
        }
        #[cfg(target_arch = "x86_64")]
        Action::Supervise if nr == libc::SYS_inotify_init => {
            super::instances::answer(listener, n, 0)
        }
        Action::Supervise if nr == libc::SYS_unshare || nr == libc::SYS_close_range => {
            super::lockwatch::own_table(n.pid)
        }
        Action::Supervise if nr == libc::SYS_connect => {
            match supervised_connect(listener, n, rules) {
                Connect::Connected => Answer::Done(0, 0),
                Connect::Kernel => Answer::Continue,
                Connect::Errno(e) => Answer::Done(0, -e),
            }
        }
        // Allowed, and handed over only to be observed, or for /dev/shm
        // and not in it: it goes on.
        Action::Allow => match (&rules.observe, paths::of(nr)) {
            (Some(o), Some(call)) => {
                observer::note(listener, n, call, o);
                Answer::Continue
            }
            (Some(o), None) if nr == libc::SYS_connect => {
                if let Ok(bytes) = read_address(n.pid, n.data.args[1], n.data.args[2])
                    && still_pending(listener, n.id).is_ok()
                    && let Some(addr) = inet_address(&bytes)
                {
                    o.connecting(addr);
                }
                Answer::Continue
            }
            _ if rules.shm.is_some() && super::shm::claims(nr) => Answer::Continue,
            _ => Answer::Done(0, -libc::EPERM),
        },
        Action::Supervise => Answer::Done(0, -libc::EPERM),
        Action::Errno(errno) => {
            if nr == libc::SYS_socket
                && let Some(o) = &rules.observe
                && matches!(args[0] as i32, libc::AF_INET | libc::AF_INET6)
                && args[1] as i32 & 0xf == libc::SOCK_DGRAM
            {
                o.refused_udp();
            }
            if !rules.report {
                return Answer::Done(0, -errno);
            }
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
            Answer::Done(0, -errno)
        }
    }
}

/// What became of a supervised `connect()`.
enum Connect {
    /// The supervisor connected the socket (or started to: a non-blocking
    /// socket answers `EINPROGRESS` as an errno).
    Connected,
    /// Not a TCP socket: the kernel decides.
    Kernel,
    /// Refused or failed.
    Errno(i32),
}

/// The family of a socket (`getsockname`).
fn family(sock: &OwnedFd) -> Result<i32, i32> {
    // SAFETY: sockaddr_storage is plain data; getsockname fills it.
    let mut addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: valid pointers to the storage and its length.
    if unsafe { libc::getsockname(sock.as_raw_fd(), (&raw mut addr).cast(), &mut len) } < 0 {
        return Err(io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EPERM));
    }
    Ok(i32::from(addr.ss_family))
}

/// The address bytes `connect(fd, addr, len)` names, read once from the
/// caller's memory; `Err` with the errno to answer.
fn read_address(pid: u32, ptr: u64, len: u64) -> Result<Vec<u8>, i32> {
    let max = std::mem::size_of::<libc::sockaddr_storage>() as u64;
    if len < 2 || len > max {
        return Err(libc::EINVAL);
    }
    let mut buf = vec![0u8; len as usize];
    if super::notif::read_memory(pid, ptr, &mut buf).map_err(|_| libc::EFAULT)? != buf.len() {
        return Err(libc::EFAULT);
    }
    Ok(buf)
}

/// The IPv4 or IPv6 address and port the bytes of a `sockaddr` name.
fn inet_address(bytes: &[u8]) -> Option<std::net::SocketAddr> {
    use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
    let family = i32::from(u16::from_ne_bytes([*bytes.first()?, *bytes.get(1)?]));
    let port = u16::from_be_bytes([*bytes.get(2)?, *bytes.get(3)?]);
    match family {
        libc::AF_INET => {
            let ip: [u8; 4] = bytes.get(4..8)?.try_into().ok()?;
            Some(SocketAddr::new(Ipv4Addr::from(ip).into(), port))
        }
        libc::AF_INET6 => {
            let ip: [u8; 16] = bytes.get(8..24)?.try_into().ok()?;
            Some(SocketAddr::new(Ipv6Addr::from(ip).into(), port))
        }
        _ => None,
    }
}

/// Whether the address bytes name exactly `proxy` (an IPv4-mapped IPv6
/// address of it too).
pub fn is_proxy(bytes: &[u8], proxy: std::net::SocketAddr) -> bool {
    use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
    if bytes.len() < 2 {
        return false;
    }
    let family = u16::from_ne_bytes([bytes[0], bytes[1]]);
    let got = match i32::from(family) {
        libc::AF_INET if bytes.len() >= 8 => {
            let port = u16::from_be_bytes([bytes[2], bytes[3]]);
            let ip = Ipv4Addr::new(bytes[4], bytes[5], bytes[6], bytes[7]);
            SocketAddr::new(IpAddr::V4(ip), port)
        }
        libc::AF_INET6 if bytes.len() >= 24 => {
            let port = u16::from_be_bytes([bytes[2], bytes[3]]);
            let mut o = [0u8; 16];
            o.copy_from_slice(&bytes[8..24]);
            let ip = Ipv6Addr::from(o);
            // A scope (link-local) is never the proxy's.
            if bytes.len() >= 28 && bytes[24..28] != [0, 0, 0, 0] {
                return false;
            }
            match ip.to_ipv4_mapped() {
                Some(v4) => SocketAddr::new(IpAddr::V4(v4), port),
                None => SocketAddr::new(IpAddr::V6(ip), port),
            }
        }
        _ => return false,
    };
    got == proxy
}

/// Judge a `connect()`: see the module's documentation.
fn supervised_connect(listener: RawFd, n: &libc::seccomp_notif, rules: &Rules) -> Connect {
    let target = n.data.args[0] as RawFd;
    let sock = match take_fd(listener, n.pid, target, n.id) {
        Ok(s) => s,
        Err(e) => return Connect::Errno(e),
    };
    match family(&sock) {
        Ok(libc::AF_INET | libc::AF_INET6) => {}
        Ok(_) => return Connect::Kernel,
        Err(e) => return Connect::Errno(e),
    }
    let Some(proxy) = rules.proxy else {
        return Connect::Errno(libc::EACCES);
    };
    let bytes = match read_address(n.pid, n.data.args[1], n.data.args[2]) {
        Ok(b) => b,
        Err(e) => return Connect::Errno(e),
    };
    // The memory read was the caller's (its pid not reused meanwhile).
    if let Err(e) = still_pending(listener, n.id) {
        return Connect::Errno(e);
    }
    let unspec = u16::from_ne_bytes([bytes[0], bytes[1]]) == libc::AF_UNSPEC as u16;
    if !unspec && !is_proxy(&bytes, proxy) {
        return Connect::Errno(libc::EACCES);
    }
    // SAFETY: connect on a socket we hold a copy of, to our own copy of
    // the address (its length is the buffer's).
    let r = unsafe {
        libc::connect(
            sock.as_raw_fd(),
            bytes.as_ptr().cast(),
            bytes.len() as libc::socklen_t,
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO);
        // The same connect() restarted after a signal, on a socket the
        // first notification connected: that is its answer.
        if e == libc::EISCONN && !unspec && peer_is(&sock, proxy) {
            return Connect::Connected;
        }
        return Connect::Errno(e);
    }
    Connect::Connected
}

/// Whether `sock` is connected to `addr`.
fn peer_is(sock: &OwnedFd, addr: std::net::SocketAddr) -> bool {
    // SAFETY: sockaddr_storage is plain data; getpeername fills it.
    let mut st: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: valid pointers to the storage and its length.
    if unsafe { libc::getpeername(sock.as_raw_fd(), (&raw mut st).cast(), &mut len) } < 0 {
        return false;
    }
    // SAFETY: `len` bytes of the storage were written by the kernel.
    let bytes = unsafe { std::slice::from_raw_parts((&raw const st).cast::<u8>(), len as usize) };
    is_proxy(bytes, addr)
}

/// Take the socket the caller names, check it, and listen on it: `Ok`, or
/// the errno to answer.
fn supervised_listen(listener: RawFd, n: &libc::seccomp_notif, rules: &Rules) -> Result<(), i32> {
    let last = || {
        io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EPERM)
    };
    // The pid still names the caller (it was not reused in between).
    let sock = take_fd(listener, n.pid, n.data.args[0] as RawFd, n.id)?;
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

#[cfg(test)]
mod tests {
    use super::is_proxy;

    fn v4(ip: [u8; 4], port: u16) -> Vec<u8> {
        let mut b = (libc::AF_INET as u16).to_ne_bytes().to_vec();
        b.extend_from_slice(&port.to_be_bytes());
        b.extend_from_slice(&ip);
        b.extend_from_slice(&[0; 8]);
        b
    }

    fn v6(ip: std::net::Ipv6Addr, port: u16, scope: u32) -> Vec<u8> {
        let mut b = (libc::AF_INET6 as u16).to_ne_bytes().to_vec();
        b.extend_from_slice(&port.to_be_bytes());
        b.extend_from_slice(&[0; 4]);
        b.extend_from_slice(&ip.octets());
        b.extend_from_slice(&scope.to_ne_bytes());
        b
    }

    #[test]
    fn only_the_proxys_own_address_is_the_proxy() {
        let proxy: std::net::SocketAddr = "127.0.0.1:3128".parse().unwrap();
        assert!(is_proxy(&v4([127, 0, 0, 1], 3128), proxy));
        let mapped = "::ffff:127.0.0.1".parse().unwrap();
        assert!(is_proxy(&v6(mapped, 3128, 0), proxy));
        // The same port elsewhere, another port, a scope, IPv6 loopback
        // (another socket may listen there), a short or foreign address.
        assert!(!is_proxy(&v4([127, 0, 0, 2], 3128), proxy));
        assert!(!is_proxy(&v4([93, 184, 216, 34], 3128), proxy));
        assert!(!is_proxy(&v4([127, 0, 0, 1], 3129), proxy));
        assert!(!is_proxy(&v6(mapped, 3128, 2), proxy));
        assert!(!is_proxy(&v6("::1".parse().unwrap(), 3128, 0), proxy));
        assert!(!is_proxy(&v4([127, 0, 0, 1], 3128)[..6], proxy));
        assert!(!is_proxy(&[1], proxy));
        let mut unix = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
        unix.extend_from_slice(b"/tmp/x\0");
        assert!(!is_proxy(&unix, proxy));
    }
}
