//! Probing the running kernel: Landlock ABI, and what a plan would lose.

use serde::Serialize;

use crate::plan::SandboxPlan;

/// Landlock availability.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "state", rename_all = "kebab-case")]
pub enum LandlockStatus {
    /// Available with this ABI version.
    Available {
        /// ABI version.
        abi: u32,
    },
    /// The kernel was built without Landlock.
    NotBuilt,
    /// Built but not enabled at boot (`lsm=` lacks `landlock`).
    Disabled,
    /// Another error.
    Error {
        /// The OS error.
        message: String,
    },
}

/// What the running kernel offers rootfence.
#[derive(Debug, Clone, Serialize)]
pub struct Capabilities {
    /// `uname -r`.
    pub kernel: String,
    /// Landlock state.
    pub landlock: LandlockStatus,
    /// Whether seccomp filters returning an errno can be installed (closes
    /// the UDP, raw, unix socket and TCP Fast Open gaps).
    pub seccomp: bool,
    /// Whether rootfence can give the server namespaces of its own (found
    /// by a test launch: only [`probe_with_namespaces`] fills it).
    pub namespaces: Option<NamespaceSupport>,
    /// Whether the server can get a network namespace of its own (network
    /// by domain's first rung), or why not; only
    /// [`probe_with_namespaces`] fills it.
    pub network_namespace: Option<NetnsSupport>,
}

/// What a test launch found about network namespaces.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NetnsSupport {
    /// A new network namespace with loopback up and a listener works.
    pub available: bool,
    /// Why not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// What a test launch found about namespaces on this machine, for this
/// user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NamespaceSupport {
    /// User, mount, PID and IPC namespaces, the filesystem view and a
    /// fresh `/proc` all work.
    pub available: bool,
    /// Overlay mounts (private layers for caches) work in them.
    pub overlay: bool,
    /// rootfence runs as root (it can also set the PID namespace's
    /// `vm.memfd_noexec`).
    pub root: bool,
    /// Why not, when not available.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

impl NamespaceSupport {
    /// Whether the server can get its namespaces.
    pub fn usable(&self) -> bool {
        self.available
    }

    /// Why the server cannot get its namespaces.
    pub fn why_not(&self) -> String {
        self.why
            .clone()
            .unwrap_or_else(|| "namespaces are not available".into())
    }
}

impl Capabilities {
    /// The Landlock ABI, 0 when unavailable.
    pub fn abi(&self) -> u32 {
        match self.landlock {
            LandlockStatus::Available { abi } => abi,
            _ => 0,
        }
    }

    /// Landlock features and whether this kernel has each:
    /// (ABI that introduced it, name, available).
    pub fn features(&self) -> Vec<(u32, &'static str, bool)> {
        let abi = self.abi();
        FEATURES
            .iter()
            .map(|&(v, name)| (v, name, abi >= v))
            .collect()
    }
}

/// Landlock features by the ABI that introduced them.
pub const FEATURES: &[(u32, &str)] = &[
    (
        1,
        "filesystem: execute, read, write, list, create, remove, make special files and symlinks",
    ),
    (2, "filesystem: refer (rename and link across directories)"),
    (3, "filesystem: truncate"),
    (4, "network: TCP bind and connect by port"),
    (5, "filesystem: ioctl on devices"),
    (6, "scopes: signals and abstract unix sockets"),
    (7, "audit logging of denials"),
    (8, "ruleset applied to every thread at once"),
    (
        9,
        "filesystem: connecting to pathname unix sockets (resolve_unix)",
    ),
];

/// Probe the running kernel.
pub fn probe() -> Capabilities {
    let kernel = rustix::system::uname()
        .release()
        .to_string_lossy()
        .into_owned();
    // SAFETY: landlock_create_ruleset(NULL, 0, LANDLOCK_CREATE_RULESET_VERSION)
    // reads no memory and returns the ABI version or -1 with errno.
    let r = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<u8>(),
            0usize,
            1u32,
        )
    };
    let landlock = if r > 0 {
        LandlockStatus::Available { abi: r as u32 }
    } else {
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::ENOSYS) => LandlockStatus::NotBuilt,
            Some(libc::EOPNOTSUPP) => LandlockStatus::Disabled,
            _ => LandlockStatus::Error {
                message: e.to_string(),
            },
        }
    };
    let seccomp = std::fs::read_to_string("/proc/sys/kernel/seccomp/actions_avail")
        .map(|s| s.contains("errno"))
        .unwrap_or(false);
    Capabilities {
        kernel,
        landlock,
        seccomp,
        namespaces: None,
        network_namespace: None,
    }
}

/// [`probe`], plus a test launch that finds whether the server can get its
/// namespaces (a millisecond or two; `doctor` and `explain` use it, a
/// launch finds out by trying).
pub fn probe_with_namespaces() -> Capabilities {
    let mut c = probe();
    c.namespaces = Some(namespaces().clone());
    c.network_namespace = Some(match super::netns::probe() {
        Ok(()) => NetnsSupport {
            available: true,
            why: None,
        },
        Err(why) => NetnsSupport {
            available: false,
            why: Some(why),
        },
    });
    c
}

/// Network by domain's rung on a machine with `caps` for `plan` (`None`
/// without `allow_domains`): how the server is kept to the proxy, and
/// whether it can be at all.
pub fn network_rung(plan: &SandboxPlan, caps: &Capabilities) -> Option<(Closed, String)> {
    plan.network.domains.as_ref()?;
    let ns = plan.namespaces != crate::plan::NamespaceMode::Off
        && caps
            .namespaces
            .as_ref()
            .is_some_and(NamespaceSupport::usable);
    let netns = caps.network_namespace.as_ref().is_some_and(|n| n.available);
    Some(if ns && netns {
        (Closed::Yes, "the server's own network namespace holds only loopback and rootfence's proxy (allow_domains): there is nothing else to connect to; the proxy resolves names and refuses the rest with 403; seccomp refuses UDP, raw and other socket families".into())
    } else if caps.abi() >= 4 && caps.seccomp {
        (
            Closed::Yes,
            format!(
                "{}Landlock allows the server no TCP port, and rootfence's seccomp supervisor connects its TCP sockets itself, to the proxy's address only (read once from the server, connected on rootfence's copy); seccomp refuses UDP, raw and other socket families",
                if ns {
                    "no network namespace here (".to_string()
                        + &caps
                            .network_namespace
                            .as_ref()
                            .and_then(|n| n.why.clone())
                            .unwrap_or_default()
                        + "): "
                } else {
                    "without namespaces: ".into()
                }
            ),
        )
    } else {
        (Closed::No, "needs a network namespace of the server's own or Landlock ABI 4 with seccomp: rootfence refuses to start the server".into())
    })
}

/// Namespace support, found once per process by a test launch. A real
/// launch does not wait for it: it tries, and (with `namespaces = "auto"`)
/// falls back when the kernel refuses.
pub fn namespaces() -> &'static NamespaceSupport {
    static ONCE: std::sync::OnceLock<NamespaceSupport> = std::sync::OnceLock::new();
    ONCE.get_or_init(super::child::probe_namespaces)
}

/// Something a plan asks for that this kernel cannot enforce.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Loss {
    /// What the plan wants.
    pub wants: String,
    /// What is missing.
    pub missing: String,
    /// Whether rootfence refuses to start because of it (fail closed).
    pub fatal: bool,
}

/// What `plan` would lose on a kernel with `caps`.
pub fn losses(plan: &SandboxPlan, caps: &Capabilities) -> Vec<Loss> {
    let abi = caps.abi();
    let mut out = Vec::new();
    if abi == 0 {
        out.push(Loss {
            wants: "filesystem confinement".into(),
            missing: "Landlock is not available on this kernel".into(),
            fatal: true,
        });
        return out;
    }
    if abi < 2 {
        out.push(Loss {
            wants: "renames and links across directories stay inside the sandbox".into(),
            missing: "Landlock ABI 2 (refer); with ABI 1 every cross-directory rename and link is refused".into(),
            fatal: false,
        });
    }
    if abi < 3 {
        out.push(Loss {
            wants: "truncation outside the roots refused".into(),
            missing: "Landlock ABI 3 (truncate)".into(),
            fatal: false,
        });
    }
    if abi < 4 {
        out.push(Loss {
            wants: "TCP connect and bind limited to the policy's ports".into(),
            missing: if caps.seccomp {
                "Landlock ABI 4 (network); all TCP/IP sockets are refused by seccomp instead".into()
            } else {
                "Landlock ABI 4 (network), and seccomp is not available to close TCP".into()
            },
            fatal: !plan.network.tcp_connect.is_empty()
                || !plan.network.tcp_bind.is_empty()
                || !caps.seccomp,
        });
    }
    if abi >= 4 {
        out.push(Loss {
            wants: "TCP Fast Open sends limited to the policy's ports".into(),
            missing: if caps.seccomp {
                "Landlock's TCP connect rule does not see sendto/sendmsg with MSG_FASTOPEN; seccomp refuses MSG_FASTOPEN".into()
            } else {
                "Landlock's TCP connect rule does not see MSG_FASTOPEN, and seccomp is not available to refuse it".into()
            },
            fatal: !caps.seccomp,
        });
    }
    if abi < 5 {
        out.push(Loss {
            wants: "ioctl on devices refused".into(),
            missing: "Landlock ABI 5 (ioctl_dev)".into(),
            fatal: false,
        });
    }
    if abi < 6 {
        out.push(Loss {
            wants: "signals and abstract unix sockets scoped to the sandbox".into(),
            missing: if caps.seccomp && !plan.network.unix_sockets {
                "Landlock ABI 6 (scopes): the server can signal processes of its user outside the sandbox; abstract unix sockets are closed by seccomp refusing socket(AF_UNIX)".into()
            } else {
                "Landlock ABI 6 (scopes): the server can signal processes of its user and connect to abstract unix sockets outside the sandbox".into()
            },
            fatal: false,
        });
    }
    if !plan.network.unix_sockets && abi < 9 {
        out.push(Loss {
            wants: "no connections to pathname unix sockets outside the sandbox".into(),
            missing: if caps.seccomp {
                "Landlock ABI 9 (resolve_unix); closed instead by seccomp refusing socket(AF_UNIX) (socketpair() still works; unix sockets inside the roots cannot be used either)".into()
            } else {
                "Landlock ABI 9 (resolve_unix), and seccomp is not available to close it".into()
            },
            fatal: !caps.seccomp,
        });
    }
    if !plan.network.udp {
        out.push(Loss {
            wants: "no UDP, raw, packet or other non-TCP sockets".into(),
            missing: if caps.seccomp {
                "not covered by Landlock at any ABI; closed by seccomp: socket() allows only unix, TCP and netlink-route sockets, io_uring is refused".into()
            } else {
                "not covered by Landlock, and seccomp is not available".into()
            },
            fatal: !caps.seccomp,
        });
    }
    // Judged where namespaces were probed (doctor, explain); a launch
    // finds out by trying, and fails closed (`netns::Net::prepare`).
    if caps.namespaces.is_some() && network_rung(plan, caps).is_some_and(|(c, _)| c == Closed::No) {
        out.push(Loss {
            wants: "network by domain (allow_domains) kept to rootfence's proxy".into(),
            missing: "a network namespace of the server's own, or Landlock ABI 4 and seccomp"
                .into(),
            fatal: true,
        });
    }
    if caps.namespaces.as_ref().is_some_and(|n| !n.usable())
        && plan.namespaces != crate::plan::NamespaceMode::Off
    {
        out.push(Loss {
            wants: "the server's own namespaces (filesystem view, PID namespace)".into(),
            missing: format!(
                "{}; the server runs with Landlock and seccomp only (see the classes below)",
                caps.namespaces
                    .as_ref()
                    .map(NamespaceSupport::why_not)
                    .unwrap_or_default()
            ),
            fatal: plan.namespaces == crate::plan::NamespaceMode::Require,
        });
    }
    out
}

/// How well a class of escape is closed on this machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Closed {
    /// Closed.
    Yes,
    /// Closed in part (what stays open is said).
    Partly,
    /// Open.
    No,
}

/// One class of escape, and what closes it here.
#[derive(Debug, Clone, Serialize)]
pub struct Coverage {
    /// The class.
    pub class: &'static str,
    /// How well it is closed.
    pub closed: Closed,
    /// The layers that close it, and what stays open.
    pub how: String,
}

/// Every class of escape of the threat model, with the layer that closes it
/// for `plan` on a machine with `caps` (`caps.namespaces` should be probed:
/// see [`probe_with_namespaces`]; unprobed counts as unavailable).
pub fn coverage(plan: &SandboxPlan, caps: &Capabilities) -> Vec<Coverage> {
    use crate::plan::NamespaceMode;
    let abi = caps.abi();
    let ns = plan.namespaces != NamespaceMode::Off
        && caps
            .namespaces
            .as_ref()
            .is_some_and(NamespaceSupport::usable);
    let overlay = ns && caps.namespaces.as_ref().is_some_and(|n| n.overlay);
    let root = caps.namespaces.as_ref().is_some_and(|n| n.root);
    let c = |class, closed, how: &str| Coverage {
        class,
        closed,
        how: how.to_string(),
    };
    let mut out = Vec::new();
    out.push(if abi > 0 {
        c(
            "reading and writing files outside the roots",
            Closed::Yes,
            "Landlock (every filesystem right of the running ABI handled)",
        )
    } else {
        c(
            "reading and writing files outside the roots",
            Closed::No,
            "Landlock is not available",
        )
    });
    out.push(if ns {
        c("metadata outside the roots and of read-only roots (chmod, chown, times, extended attributes, ACLs)", Closed::Yes, "the server's own filesystem view: what is not granted is not there, read-only grants are read-only mounts")
    } else {
        c("metadata outside the roots and of read-only roots (chmod, chown, times, extended attributes, ACLs)", Closed::Partly, "seccomp refuses extended attributes (POSIX ACLs), chown and setuid/setgid/world-writable modes; other mode bits and timestamps of files the server's user owns stay changeable (needs namespaces)")
    });
    out.push(if ns {
        c(
            "existence and names of files outside the roots (stat, inotify)",
            Closed::Yes,
            "the server's own filesystem view",
        )
    } else {
        c(
            "existence and names of files outside the roots (stat, inotify)",
            Closed::No,
            "Landlock does not rule on stat or inotify_add_watch (needs namespaces)",
        )
    });
    out.push(if ns {
        c("processes outliving the server, its generation or the session", Closed::Yes, "PID namespace: when the server exits its init exits and the kernel ends every process in it, before rootfence sees the exit")
    } else {
        c("processes outliving the server, its generation or the session", Closed::Partly, "rootfence is the subreaper of everything the server starts and ends what is left when the server exits; if rootfence itself is killed with SIGKILL, processes that left the server's process group survive (needs namespaces)")
    });
    out.push(c("the user's terminal", Closed::Yes, "exec relays a terminal through pipes (the server never holds it); run gives the server pipes only; seccomp refuses TIOCSTI and TIOCLINUX"));
    if let Some((closed, how)) = network_rung(plan, caps) {
        out.push(Coverage {
            class: "network",
            closed,
            how: format!("by domain: {how}"),
        });
    } else if abi >= 4 && caps.seccomp {
        out.push(if plan.network.tcp_bind.is_empty() {
            c("network", Closed::Yes, "Landlock TCP connect and bind by port; seccomp refuses UDP, raw and other families, MSG_FASTOPEN, and listen() without a bind port")
        } else {
            c("network", Closed::Partly, "Landlock TCP connect and bind by port; seccomp refuses UDP, raw and other families and MSG_FASTOPEN; with tcp_bind ports granted, listen() on a socket never bound takes an ephemeral port (Landlock does not see it)")
        });
    } else {
        out.push(c("network", Closed::Partly, "Landlock before ABI 4 cannot rule on TCP ports: every TCP/IP socket is refused by seccomp"));
    }
    out.push(c(
        "System V IPC and POSIX message queues",
        if caps.seccomp {
            Closed::Yes
        } else {
            Closed::No
        },
        if ns {
            "seccomp refuses every call; the server also has its own IPC namespace"
        } else {
            "seccomp refuses every call"
        },
    ));
    out.push(if abi >= 6 {
        c(
            "signals and abstract unix sockets outside the sandbox",
            Closed::Yes,
            if ns {
                "Landlock scopes (ABI 6); the PID namespace also hides every outside process"
            } else {
                "Landlock scopes (ABI 6)"
            },
        )
    } else {
        c(
            "signals and abstract unix sockets outside the sandbox",
            Closed::No,
            "needs Landlock ABI 6",
        )
    });
    out.push(c("pathname unix sockets outside the roots", if abi >= 9 || caps.seccomp { Closed::Yes } else { Closed::No }, if abi >= 9 { "Landlock resolve_unix (ABI 9)" } else { "seccomp refuses socket(AF_UNIX) and datagram socketpair() (unless the policy allows unix sockets)" }));
    out.push(if ns {
        c("limits, priority and scheduling of other processes", Closed::Yes, "PID namespace: no outside process can be named")
    } else {
        c("limits, priority and scheduling of other processes", Closed::Yes, "seccomp refuses prlimit64, sched_set*, ioprio_set and setpriority on any process but the caller")
    });
    out.push(if ns {
        c("other processes in /proc", Closed::Yes, "a /proc of the server's own PID namespace (hidepid=ptraceable), /proc/sys masked")
    } else {
        c("other processes in /proc", Closed::Partly, "Landlock grants only the server's own /proc/self (its children get none); pids of other processes can be probed with stat or kill(pid, 0)")
    });
    out.push(if overlay {
        c("shared caches run later outside (npm, uv)", Closed::Yes, "written only through a private overlay layer, discarded with the scratch directory; npx and uvx still run what the cache holds")
    } else {
        c("shared caches run later outside (npm, uv)", Closed::Yes, "read-only; the runtime gets an empty private cache instead (npx -y and uvx then need the network for packages)")
    });
    out.push(match ns {
        true => c("version-control and editor metadata in writable roots", Closed::Partly, "existing .git/config, .git/hooks, .git/info, .hg/hgrc, .envrc, .vscode and .idea (in a root and its direct subdirectories) are read-only in the view; metadata the server creates where there was none is not protected ([roots] vcs = \"refuse\" closes it)"),
        false => c("version-control and editor metadata in writable roots", Closed::No, "Landlock cannot make part of a granted tree read-only: warned at start; [roots] vcs = \"refuse\" closes it"),
    });
    out.push(if ns {
        c("running code from roots (exec_in_roots = false)", Closed::Partly, &format!("Landlock refuses execve; roots and writable grants are mounted noexec (no loader tricks){}; code the server writes into its own memory (an interpreter, a JIT) is not a boundary, and stays confined", if root { ", memfds are not executable (vm.memfd_noexec = 2)" } else { "; memfds stay executable (vm.memfd_noexec needs rootfence to run as root)" }))
    } else {
        c("running code from roots (exec_in_roots = false)", Closed::Partly, "Landlock refuses execve only: the dynamic loader and memfd execution still run code from roots (it stays confined)")
    });
    out.push(c("files rootfence trusts (policy, audit file)", Closed::Yes, "denied as roots under every name, read and appended without following symlinks, refused with more than one link"));
    out.push(c(
        "kernel interfaces as roots (/proc, /sys, /dev, cgroups, debugfs, ...)",
        Closed::Yes,
        "refused by filesystem type on the open handle and by path",
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;
    use crate::runtime::{CommandSpec, HostEnv};

    fn plan(tcp: bool) -> SandboxPlan {
        let policy = Policy::builtin(None).unwrap();
        let command = CommandSpec::with_needs("/bin/true", vec![]);
        let mut p = crate::plan::build(&policy, vec![], vec![], command, &HostEnv::default());
        if tcp {
            p.network.tcp_connect = vec![443];
        }
        p
    }

    fn caps(abi: u32, seccomp: bool) -> Capabilities {
        Capabilities {
            kernel: "test".into(),
            landlock: if abi == 0 {
                LandlockStatus::NotBuilt
            } else {
                LandlockStatus::Available { abi }
            },
            seccomp,
            namespaces: None,
            network_namespace: None,
        }
    }

    fn fatal(l: &[Loss]) -> Vec<&str> {
        l.iter()
            .filter(|l| l.fatal)
            .map(|l| l.wants.as_str())
            .collect()
    }

    #[test]
    fn no_landlock_is_fatal() {
        let l = losses(&plan(false), &caps(0, true));
        assert_eq!(fatal(&l), ["filesystem confinement"]);
    }

    #[test]
    fn tcp_ports_need_abi_4() {
        assert!(!fatal(&losses(&plan(true), &caps(3, true))).is_empty());
        assert!(fatal(&losses(&plan(false), &caps(3, true))).is_empty());
        assert!(fatal(&losses(&plan(true), &caps(4, true))).is_empty());
    }

    #[test]
    fn without_seccomp_the_socket_gaps_are_fatal() {
        let l = losses(&plan(false), &caps(7, false));
        let f = fatal(&l);
        assert!(f.iter().any(|w| w.contains("UDP")), "{f:?}");
        assert!(f.iter().any(|w| w.contains("unix sockets")), "{f:?}");
        assert!(f.iter().any(|w| w.contains("Fast Open")), "{f:?}");
    }

    #[test]
    fn this_kind_of_kernel_runs_and_says_what_seccomp_closes() {
        let l = losses(&plan(false), &caps(7, true));
        assert!(fatal(&l).is_empty(), "{l:?}");
        assert!(l.iter().any(|l| l.missing.contains("seccomp")));
    }
}
