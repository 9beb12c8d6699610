//! Network by domain, the sandbox's side: a server whose plan has
//! [`DomainPlan`](crate::plan::DomainPlan) can connect to rootfence's
//! network proxy ([`crate::netproxy`]) and to nothing else, whatever it
//! does (another address, `--noproxy`, a raw socket, UDP, DNS).
//!
//! Two rungs, chosen by the launch's mode:
//!
//! - **With namespaces**: the server also gets a network namespace of its
//!   own, holding only a loopback interface. Its init (the namespaces'
//!   first process, which holds the capabilities there) brings loopback
//!   up, makes a listening TCP socket on `127.0.0.1:`[`PROXY_PORT`], sends
//!   it to rootfence over a socket pair and closes it before the server
//!   starts ([`setup_in_child`]). rootfence accepts on it and connects out
//!   from its own namespace: the server has nothing else to reach.
//!   Landlock also limits its TCP connects to that port (ABI 4+).
//! - **Without namespaces**: the proxy listens on an ephemeral port of
//!   rootfence's own `127.0.0.1`. Landlock allows the server no TCP port
//!   at all, and its `connect()` goes to the seccomp supervisor, which
//!   connects the socket itself to its own copy of the address when that
//!   is the proxy's, and refuses it otherwise (see
//!   [`super::seccomp::supervisor`]). Needs Landlock ABI 4.
//!
//! Everything here but [`setup_in_child`] runs in rootfence before the
//! `clone` or after the server started.

use std::borrow::Cow;
use std::ffi::OsString;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use super::SandboxError;
use super::seccomp::FilterPolicy;
use crate::netproxy::{self, Proxy};
use crate::plan::SandboxPlan;

/// The port the proxy listens on in the server's own network namespace
/// (any port would do: nothing else listens there).
pub const PROXY_PORT: u16 = 3128;

/// What the child needs to make the proxy's listener in its namespace.
#[derive(Debug)]
pub struct NetChild {
    /// The child's end of the socket pair the listener is sent on.
    pub sock: RawFd,
    /// The port to listen on.
    pub port: u16,
}

/// Where the proxy's listener comes from.
#[derive(Debug)]
enum Rung {
    /// Made by the child in the server's network namespace and sent over
    /// this socket pair (rootfence's end, and the child's end, which
    /// rootfence holds until the listener is received).
    Namespace { mine: OwnedFd, theirs: OwnedFd },
    /// rootfence's own loopback; the supervisor connects for the server.
    Loopback { listener: std::net::TcpListener },
}

/// The network proxy of one launch, from before `clone` until it runs.
#[derive(Debug)]
pub struct Net {
    config: netproxy::Config,
    audit: Option<std::path::PathBuf>,
    rung: Rung,
}

impl Net {
    /// The proxy a launch of `plan` needs, if any: in the server's own
    /// network namespace when the launch gives it namespaces, else on
    /// rootfence's loopback (which needs Landlock ABI 4: `abi`).
    pub fn prepare(
        plan: &SandboxPlan,
        confine: bool,
        namespaces: bool,
        abi: u32,
    ) -> Result<Option<Net>, SandboxError> {
        let Some(d) = &plan.network.domains else {
            return Ok(None);
        };
        if !confine {
            // No sandbox: nothing to enforce a proxy with.
            return Ok(None);
        }
        let launcher = |e: std::io::Error| SandboxError::Launcher(e);
        let rung = if namespaces && available() {
            let (mine, theirs) = rustix::net::socketpair(
                rustix::net::AddressFamily::UNIX,
                rustix::net::SocketType::SEQPACKET,
                rustix::net::SocketFlags::CLOEXEC,
                None,
            )
            .map_err(|e| launcher(e.into()))?;
            // Above the standard streams, which the child overwrites.
            let theirs = if theirs.as_raw_fd() > 2 {
                theirs
            } else {
                rustix::io::fcntl_dupfd_cloexec(&theirs, 3).map_err(|e| launcher(e.into()))?
            };
            Rung::Namespace { mine, theirs }
        } else {
            if abi < 4 {
                return Err(SandboxError::CannotEnforce {
                    missing: vec![
                        "[network] allow_domains without namespaces needs Landlock ABI 4 (TCP by port) to keep the server's connections to rootfence's proxy; give the server namespaces (a kernel that grants user namespaces) or use a newer kernel".into(),
                    ],
                });
            }
            let listener =
                std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).map_err(launcher)?;
            Rung::Loopback { listener }
        };
        Ok(Some(Net {
            config: netproxy::Config {
                rules: d.allow.clone(),
                pins: d.hosts.clone(),
                policy: plan.policy.clone(),
            },
            audit: d.audit_file.clone(),
            rung,
        }))
    }

    /// The address the server is told (`HTTP_PROXY`), as the server sees
    /// it.
    pub fn address(&self) -> SocketAddr {
        match &self.rung {
            Rung::Namespace { .. } => SocketAddr::from((Ipv4Addr::LOCALHOST, PROXY_PORT)),
            Rung::Loopback { listener } => listener
                .local_addr()
                .unwrap_or_else(|_| SocketAddr::from((Ipv4Addr::LOCALHOST, 0))),
        }
    }

    /// Point the server's HTTP clients at the proxy (`NO_PROXY` was left
    /// out by the plan).
    pub fn set_env(&self, env: &mut Vec<(OsString, OsString)>) {
        let url = format!("http://{}", self.address());
        for (k, v) in netproxy::proxy_env(&url) {
            env.retain(|(n, _)| n.as_os_str() != k);
            env.push((k.into(), v.into()));
        }
    }

    /// The seccomp filter's part: inet sockets are safe in a network of
    /// their own whatever Landlock can do; without one, every `connect()`
    /// is the supervisor's.
    pub fn adjust_filter(&self, filter: &mut FilterPolicy) {
        match self.rung {
            Rung::Namespace { .. } => filter.deny_inet = false,
            Rung::Loopback { .. } => filter.supervise_connect = true,
        }
    }

    /// The only address the supervisor connects a server's socket to
    /// (without namespaces).
    pub fn supervised_address(&self) -> Option<SocketAddr> {
        match self.rung {
            Rung::Namespace { .. } => None,
            Rung::Loopback { .. } => Some(self.address()),
        }
    }

    /// The extra `clone` flag: a network namespace, with namespaces.
    pub fn clone_flags(&self) -> u64 {
        match self.rung {
            Rung::Namespace { .. } => libc::CLONE_NEWNET as u64,
            Rung::Loopback { .. } => 0,
        }
    }

    /// What the namespaces' init does, with namespaces.
    pub fn child(&self) -> Option<NetChild> {
        match &self.rung {
            Rung::Namespace { theirs: t, .. } => Some(NetChild {
                sock: t.as_raw_fd(),
                port: PROXY_PORT,
            }),
            _ => None,
        }
    }

    /// Once the server started: take the listener (from the child, with
    /// namespaces) and serve it.
    pub fn start(self) -> std::io::Result<Proxy> {
        let rung = match &self.rung {
            Rung::Namespace { .. } => "in the server's own network namespace",
            Rung::Loopback { .. } => {
                "on rootfence's loopback; the server's connect() judged by rootfence"
            }
        };
        let address = self.address();
        let listener = match self.rung {
            // The child's end, held until now (the child sent the
            // listener before its server's `execve`).
            Rung::Namespace { mine, theirs } => {
                drop(theirs);
                std::net::TcpListener::from(super::fdpass::receive(
                    &mine,
                    "the network proxy's listener",
                )?)
            }
            Rung::Loopback { listener } => listener,
        };
        let p = Proxy::start(listener, self.config, self.audit)?;
        tracing::info!(
            "network: only rootfence's HTTP proxy at {address} ({rung}), to the hosts of [network] allow_domains"
        );
        Ok(p)
    }
}

/// The plan a launch applies: Landlock's TCP connect limited to the
/// proxy's port in the server's own network (when Landlock can rule on
/// ports), to no port without one (the supervisor connects).
pub fn launch_plan<'a>(net: Option<&Net>, plan: &'a SandboxPlan, abi: u32) -> Cow<'a, SandboxPlan> {
    let Some(net) = net else {
        return Cow::Borrowed(plan);
    };
    let mut p = plan.clone();
    p.network.tcp_connect = match net.rung {
        Rung::Namespace { .. } if abi >= 4 => vec![PROXY_PORT],
        _ => Vec::new(),
    };
    p.network.tcp_bind = Vec::new();
    p.network.udp = false;
    Cow::Owned(p)
}

/// `struct sockaddr_in` for `127.0.0.1:port`.
fn loopback(port: u16) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: port.to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(Ipv4Addr::LOCALHOST).to_be(),
        },
        sin_zero: [0; 8],
    }
}

/// Bring the loopback interface of the calling process's network
/// namespace up; the errno on failure.
///
/// # Safety
///
/// Async-signal-safe: raw system calls on locals.
unsafe fn loopback_up() -> Result<(), i32> {
    // SAFETY (whole body): raw system calls with pointers to locals.
    unsafe {
        let s = libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if s < 0 {
            return Err(errno());
        }
        let mut ifr: libc::ifreq = std::mem::zeroed();
        for (d, c) in ifr.ifr_name.iter_mut().zip(b"lo") {
            *d = *c as libc::c_char;
        }
        let mut r = libc::ioctl(s, libc::SIOCGIFFLAGS, &mut ifr);
        if r == 0 {
            ifr.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
            r = libc::ioctl(s, libc::SIOCSIFFLAGS, &ifr);
        }
        let e = errno();
        libc::close(s);
        if r < 0 { Err(e) } else { Ok(()) }
    }
}

/// A TCP socket listening on `127.0.0.1:port` (close-on-exec); the errno
/// on failure.
///
/// # Safety
///
/// Async-signal-safe: raw system calls on locals.
unsafe fn listen_on(port: u16) -> Result<RawFd, i32> {
    // SAFETY (whole body): raw system calls with pointers to locals.
    unsafe {
        let l = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if l < 0 {
            return Err(errno());
        }
        let addr = loopback(port);
        if libc::bind(
            l,
            (&raw const addr).cast(),
            std::mem::size_of::<libc::sockaddr_in>() as libc::socklen_t,
        ) < 0
            || libc::listen(l, 1024) < 0
        {
            let e = errno();
            libc::close(l);
            return Err(e);
        }
        Ok(l)
    }
}

/// The errno of the last failed call.
fn errno() -> i32 {
    // SAFETY: reading the calling thread's errno.
    unsafe { *libc::__errno_location() }
}

/// In the namespaces' init, before the server starts: bring loopback up,
/// listen on `127.0.0.1:port`, send the listener to rootfence, close it
/// (the server never holds it). On failure, the step (0 loopback, 1 the
/// listener, 2 sending it) and the errno.
///
/// # Safety
///
/// Async-signal-safe: raw system calls on locals and `net`'s numbers; for
/// the child between `clone` and `exec` only.
pub unsafe fn setup_in_child(net: &NetChild) -> Result<(), (u32, i32)> {
    // SAFETY (whole body): the functions called are async-signal-safe.
    unsafe {
        loopback_up().map_err(|e| (0, e))?;
        let l = listen_on(net.port).map_err(|e| (1, e))?;
        let sent = super::fdpass::send(net.sock, l);
        libc::close(l);
        libc::close(net.sock);
        sent.map_err(|e| (2, e))
    }
}

/// Whether a server can get a network namespace of its own here: probed
/// once per process (see [`probe`]). Where it cannot, a launch with the
/// other namespaces takes the rung without one.
pub fn available() -> bool {
    static ONCE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ONCE.get_or_init(|| match probe() {
        Ok(()) => true,
        Err(why) => {
            tracing::warn!(
                "the server cannot get a network namespace of its own ({why}): network by domain is held by Landlock and rootfence's supervisor instead"
            );
            false
        }
    })
}

/// Whether this machine gives a server a network namespace of its own
/// (found by a test launch: a child in new user and network namespaces,
/// or a network namespace alone as root, brings loopback up and listens
/// on it), or why not.
pub fn probe() -> Result<(), String> {
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    let flags = if root {
        libc::CLONE_NEWNET
    } else {
        libc::CLONE_NEWUSER | libc::CLONE_NEWNET
    };
    // SAFETY: the child runs only raw system calls on locals, then
    // `_exit`: safe after fork in a multi-threaded process.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        // SAFETY: the forked child, single-threaded.
        unsafe {
            if libc::unshare(flags) < 0 {
                libc::_exit(10);
            }
            let net = NetChild {
                sock: -1,
                port: PROXY_PORT,
            };
            let code = match probe_child(&net) {
                Ok(()) => 0,
                Err(step) => 11 + step as i32,
            };
            libc::_exit(code)
        }
    }
    if pid < 0 {
        return Err(format!(
            "cannot start the probe: {}",
            std::io::Error::last_os_error()
        ));
    }
    let mut status = 0;
    // SAFETY: reaping our own child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    let code = if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    };
    match code {
        0 => Ok(()),
        10 => Err("the kernel refuses a new network namespace here".into()),
        11 => Err("loopback cannot be brought up in a new network namespace".into()),
        12 => Err("nothing can listen in a new network namespace".into()),
        c => Err(format!("the probe ended with status {c}")),
    }
}

/// The probe's child: loopback up and a listener (left to `_exit`).
unsafe fn probe_child(net: &NetChild) -> Result<(), u32> {
    // SAFETY: async-signal-safe calls only.
    unsafe {
        loopback_up().map_err(|_| 0u32)?;
        listen_on(net.port).map_err(|_| 1u32)?;
        Ok(())
    }
}
