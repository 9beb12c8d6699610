//! Network by domain, the sandbox's side: a server whose plan has
//! [`DomainPlan`](crate::plan::DomainPlan) can connect to rootfence's
//! network proxy ([`crate::netproxy`]) and to nothing else, whatever it
//! does (another address, `--noproxy`, a raw socket, UDP, DNS).
//!
//! Two designs ([`DomainRung`]), chosen for the launch's rung by
//! [`super::coverage::domain_rung`]:
//!
//! - **The server's own network namespace** (the full rung where the
//!   kernel grants one, and always on the view + seccomp rung, which has
//!   no Landlock to rule on ports): the namespace holds only a loopback
//!   interface. Its init (the namespaces' first process, which holds the
//!   capabilities there) brings loopback up, makes a listening TCP socket
//!   on `127.0.0.1:`[`PROXY_PORT`], sends it to rootfence over a socket
//!   pair and closes it before the server starts ([`setup_in_child`]).
//!   rootfence accepts on it and connects out from its own namespace: the
//!   server has nothing else to reach. Where Landlock rules on ports (ABI
//!   4), it also limits the server's TCP connects to that port.
//! - **Supervised `connect()`** (no network namespace: the Landlock +
//!   seccomp rung, or a kernel that refuses network namespaces while it
//!   grants the others): the proxy listens on an ephemeral port of
//!   rootfence's own `127.0.0.1`. Landlock allows the server no TCP port
//!   at all, and its `connect()` goes to the seccomp supervisor, which
//!   connects the socket itself to its own copy of the address when that
//!   is the proxy's, and refuses it otherwise (see
//!   [`super::seccomp::supervisor`]). Needs Landlock ABI 4.
//!
//! Everything here but [`setup_in_child`] and the probe's child runs in
//! rootfence before the `clone` or after the server started.

use std::borrow::Cow;
use std::ffi::OsString;
use std::net::{Ipv4Addr, SocketAddr};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};

use super::SandboxError;
use super::ladder::{DomainRung, NoNetns, Rung, domain_rung};
use super::protocol::errno;
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
enum Listener {
    /// Made by the child in the server's network namespace and sent over
    /// this socket pair (rootfence's end, and the child's end, which
    /// rootfence holds until the listener is received).
    Namespace { mine: OwnedFd, theirs: OwnedFd },
    /// rootfence's own loopback; the supervisor connects for the server.
    Loopback { listener: std::net::TcpListener },
}

/// Why the network proxy of a launch could not start.
#[derive(Debug, thiserror::Error)]
pub enum ProxyStart {
    /// Its listener did not come from the child.
    #[error(transparent)]
    Listener(#[from] super::fdpass::NotReceived),
    /// It could not be started on its listener.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// The network proxy of one launch, from before `clone` until it runs.
#[derive(Debug)]
pub struct Net {
    config: netproxy::Config,
    audit: Option<std::path::PathBuf>,
    listener: Listener,
}

impl Net {
    /// The proxy a launch of `plan` at `rung` needs (`None` without
    /// `allow_domains`, or unconfined: `rung` is `None`), on a kernel with
    /// Landlock ABI `abi`; or the refusal when neither design can hold it
    /// here.
    ///
    /// The launch is the probe: the server's own network namespace is
    /// asked for unless a launch found it refused (`netns_refused`, why);
    /// a refusal the rung can do without is retried with the supervised
    /// design (`spawn`).
    pub fn prepare(
        plan: &SandboxPlan,
        rung: Option<Rung>,
        abi: u32,
        netns_refused: Option<&str>,
    ) -> Result<Option<Net>, SandboxError> {
        let (Some(d), Some(rung)) = (&plan.network.domains, rung) else {
            return Ok(None);
        };
        let netns = match netns_refused {
            _ if !rung.namespaces() => Err(NoNetns::LaunchWithout),
            Some(why) => Err(NoNetns::Refused(why.to_string())),
            None => Ok(()),
        };
        let launcher = |e: std::io::Error| SandboxError::Launcher(e);
        let decided = domain_rung(rung, netns.clone(), abi);
        if let (Ok(DomainRung::SupervisedConnect), Err(why)) = (&decided, &netns)
            && rung.namespaces()
        {
            static WARNED: std::sync::Once = std::sync::Once::new();
            WARNED.call_once(|| {
                tracing::warn!(
                    "the server cannot get a network namespace of its own ({why}): network by domain is held by Landlock and rootfence's supervised connect() instead"
                );
            });
        }
        let listener = match decided {
            Ok(DomainRung::NetworkNamespace) => {
                let (mine, theirs) = rustix::net::socketpair(
                    rustix::net::AddressFamily::UNIX,
                    rustix::net::SocketType::SEQPACKET,
                    rustix::net::SocketFlags::CLOEXEC,
                    None,
                )
                .map_err(|e| launcher(e.into()))?;
                // Above the standard streams, which the child overwrites.
                let theirs = super::stdio::above_stdio(theirs)?;
                Listener::Namespace { mine, theirs }
            }
            Ok(DomainRung::SupervisedConnect) => Listener::Loopback {
                listener: std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
                    .map_err(launcher)?,
            },
            Err(missing) => {
                return Err(SandboxError::CannotEnforce {
                    missing: vec![missing.into()],
                });
            }
        };
        Ok(Some(Net {
            config: netproxy::Config {
                rules: d.allow.clone(),
                pins: d.hosts.clone(),
                policy: plan.policy.clone(),
            },
            audit: d.audit_file.clone(),
            listener,
        }))
    }

    /// The design this launch takes.
    pub fn rung(&self) -> DomainRung {
        match self.listener {
            Listener::Namespace { .. } => DomainRung::NetworkNamespace,
            Listener::Loopback { .. } => DomainRung::SupervisedConnect,
        }
    }

    /// The address the server is told (`HTTP_PROXY`), as the server sees
    /// it.
    pub fn address(&self) -> SocketAddr {
        match &self.listener {
            Listener::Namespace { .. } => SocketAddr::from((Ipv4Addr::LOCALHOST, PROXY_PORT)),
            Listener::Loopback { listener } => listener
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
        match self.listener {
            Listener::Namespace { .. } => filter.deny_inet = false,
            Listener::Loopback { .. } => filter.supervise_connect = true,
        }
    }

    /// The only address the supervisor connects a server's socket to
    /// (without a network namespace).
    pub fn supervised_address(&self) -> Option<SocketAddr> {
        match self.listener {
            Listener::Namespace { .. } => None,
            Listener::Loopback { .. } => Some(self.address()),
        }
    }

    /// The extra `clone` flag: a network namespace, in that design.
    pub fn clone_flags(&self) -> u64 {
        match self.listener {
            Listener::Namespace { .. } => libc::CLONE_NEWNET as u64,
            Listener::Loopback { .. } => 0,
        }
    }

    /// What the namespaces' init does, in the network namespace design.
    pub fn child(&self) -> Option<NetChild> {
        match &self.listener {
            Listener::Namespace { theirs: t, .. } => Some(NetChild {
                sock: t.as_raw_fd(),
                port: PROXY_PORT,
            }),
            Listener::Loopback { .. } => None,
        }
    }

    /// Once the server started: take the listener (from the child, in its
    /// network namespace) and serve it.
    pub fn start(self) -> Result<Proxy, ProxyStart> {
        let rung = self.rung();
        let address = self.address();
        let listener = match self.listener {
            // The child's end, held until now (the child sent the
            // listener before its server's `execve`).
            Listener::Namespace { mine, theirs } => {
                drop(theirs);
                std::net::TcpListener::from(super::fdpass::receive(
                    &mine,
                    "the network proxy's listener",
                )?)
            }
            Listener::Loopback { listener } => listener,
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
    p.network.tcp_connect = match net.listener {
        Listener::Namespace { .. } if abi >= 4 => vec![PROXY_PORT],
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
pub(super) unsafe fn loopback_up() -> Result<(), i32> {
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
pub(super) unsafe fn listen_on(port: u16) -> Result<RawFd, i32> {
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
