//! What a plan gets on this machine: the rung of isolation, what the plan
//! would lose ([`losses`]), and every class of escape of the threat model
//! with the layer that closes it ([`coverage`]).
//!
//! # The ladder
//!
//! - **full**: Landlock, the seccomp filter, and the server's own
//!   namespaces with its filesystem view;
//! - **Landlock + seccomp**: where the kernel or a sandbox around rootfence
//!   refuses namespaces (a container, Ubuntu's AppArmor restriction
//!   without rootfence's profile), or `[isolation] namespaces = "off"`;
//! - **view + seccomp**: where the kernel has no Landlock but grants
//!   namespaces, accepted only with `[isolation] landlock = "prefer"`
//!   (what bubblewrap gives); by default a kernel without Landlock is
//!   refused.
//!
//! Network by domain (`[network] allow_domains`) takes one of two designs
//! on each rung ([`domain_rung`]): the server's own network namespace
//! holding only rootfence's proxy, or supervised `connect()` under
//! Landlock's TCP rules.
//!
//! The words of [`coverage`] are those of the README's table "What the
//! fence holds"; `rootfence doctor` and `rootfence explain` print them.

use serde::Serialize;

pub use super::ladder::{DomainRung, Loss, Rung, domain_rung};
use super::ladder::{NoDomainRung, NoLandlock, NoNamespaces, NoNetns, NoRung};
use super::nsprobe::NamespaceSupport;
use super::probe::Capabilities;
use super::resources;
use crate::plan::{LandlockMode, NamespaceMode, SandboxPlan};

/// Network by domain's design for `plan` on a machine with `caps` (the
/// rung the plan gets there, and `caps.network_namespace`; unprobed counts
/// as unavailable), whether or not the plan lists domains.
pub fn domain_rung_here(
    plan: &SandboxPlan,
    caps: &Capabilities,
) -> Result<DomainRung, NoDomainRung> {
    let rung = rung(plan, caps).unwrap_or(if caps.abi() > 0 {
        Rung::LandlockSeccomp
    } else {
        Rung::ViewSeccomp
    });
    let netns = if !rung.namespaces() {
        Err(NoNetns::RungWithout)
    } else {
        match &caps.network_namespace {
            Some(n) if n.available => Ok(()),
            Some(n) => Err(NoNetns::Refused(n.why_not())),
            None => Err(NoNetns::NotProbed),
        }
    };
    domain_rung(rung, netns, caps.abi())
}

/// Why there is no Landlock here, where `caps.abi()` is 0 (a Landlock
/// reported available, which a kernel never does at ABI 0, reads as one
/// built without it).
pub fn landlock_missing(caps: &Capabilities) -> NoLandlock {
    caps.landlock.missing().unwrap_or(NoLandlock::NotBuilt)
}

/// Why there is no Landlock here, and what to do: one sentence.
pub fn no_landlock(caps: &Capabilities) -> NoRung {
    NoRung::NoLandlock(landlock_missing(caps))
}

/// No Landlock, and the view + seccomp rung the policy accepts cannot be
/// had either (`namespaces`: why they are not to be had).
pub fn neither(caps: &Capabilities, namespaces: NoNamespaces) -> NoRung {
    NoRung::Neither {
        landlock: landlock_missing(caps),
        namespaces,
    }
}

/// The rung `plan` gets on a machine with `caps` (whose namespaces were
/// probed: see [`super::probe_with_namespaces`]; unprobed counts as
/// unavailable, but an unprobed network namespace does not stop the view +
/// seccomp rung), or what is missing for any.
pub fn rung(plan: &SandboxPlan, caps: &Capabilities) -> Result<Rung, NoRung> {
    let ns = plan.namespaces != NamespaceMode::Off
        && caps
            .namespaces
            .as_ref()
            .is_some_and(NamespaceSupport::usable);
    let why_no_ns = || match plan.namespaces {
        NamespaceMode::Off => NoNamespaces::Off,
        _ => caps
            .namespaces
            .as_ref()
            .map_or(NoNamespaces::NotProbed, |n| {
                NoNamespaces::Refused(n.why_not())
            }),
    };
    match (caps.abi() > 0, ns) {
        (true, true) => Ok(Rung::Full),
        (true, false) if plan.namespaces == NamespaceMode::Require => {
            Err(NoRung::NamespacesRequired(why_no_ns()))
        }
        (true, false) => Ok(Rung::LandlockSeccomp),
        (false, _) if plan.landlock == LandlockMode::Require => Err(no_landlock(caps)),
        // The rung's namespaces include a network namespace (it keeps the
        // host's abstract unix sockets out of reach without Landlock's
        // scopes): where it was probed and refused, the rung is not had.
        (false, true) => match &caps.network_namespace {
            Some(n) if !n.available => Err(neither(
                caps,
                NoNamespaces::Network(NoNetns::Refused(n.why_not())),
            )),
            _ => Ok(Rung::ViewSeccomp),
        },
        (false, false) => Err(neither(caps, why_no_ns())),
    }
}

/// What `plan` would lose on a machine with `caps`.
pub fn losses(plan: &SandboxPlan, caps: &Capabilities) -> Vec<Loss> {
    let abi = caps.abi();
    let mut out = Vec::new();
    let loss = |wants: &str, missing: String, fatal: bool| Loss {
        wants: wants.into(),
        missing,
        fatal,
    };
    if abi == 0 {
        match rung(plan, caps) {
            Ok(_) => out.push(loss(
                "filesystem and TCP confinement by Landlock",
                format!(
                    "{}; the server is confined by its own namespaces' filesystem view and seccomp instead ([isolation] landlock = \"prefer\"), and TCP is refused whole",
                    no_landlock(caps)
                ),
                false,
            )),
            Err(missing) if plan.landlock == LandlockMode::Prefer && caps.namespaces.is_none() => {
                // Namespaces not probed: a launch finds out by trying.
                out.push(loss(
                    "filesystem and TCP confinement by Landlock",
                    missing.to_string(),
                    false,
                ));
            }
            Err(missing) => {
                out.push(loss("filesystem confinement", missing.to_string(), true));
                return out;
            }
        }
    } else {
        landlock_losses(plan, caps, &mut out);
    }
    socket_losses(plan, caps, &mut out);
    // Judged where namespaces were probed (doctor, explain); a launch
    // finds out by trying, and fails closed (`netns::Net::prepare`).
    if plan.network.domains.is_some()
        && caps.namespaces.is_some()
        && let Err(missing) = domain_rung_here(plan, caps)
    {
        out.push(loss(
            "network by domain (allow_domains) kept to rootfence's proxy",
            missing.to_string(),
            true,
        ));
    }
    if abi > 0
        && caps.namespaces.as_ref().is_some_and(|n| !n.usable())
        && plan.namespaces != NamespaceMode::Off
    {
        out.push(loss(
            "the server's own namespaces (filesystem view, PID namespace)",
            format!(
                "{}; the server runs with Landlock and seccomp only (see the classes below)",
                caps.namespaces
                    .as_ref()
                    .map(NamespaceSupport::why_not)
                    .unwrap_or_default()
            ),
            plan.namespaces == NamespaceMode::Require,
        ));
    }
    out
}

/// What the Landlock ABI here lacks (with Landlock).
fn landlock_losses(plan: &SandboxPlan, caps: &Capabilities, out: &mut Vec<Loss>) {
    let abi = caps.abi();
    let mut loss = |wants: &str, missing: &str, fatal: bool| {
        out.push(Loss {
            wants: wants.into(),
            missing: missing.into(),
            fatal,
        })
    };
    if abi < 2 {
        loss(
            "renames and links across directories stay inside the sandbox",
            "Landlock ABI 2 (refer); with ABI 1 every cross-directory rename and link is refused",
            false,
        );
    }
    if abi < 3 {
        loss(
            "truncation outside the roots refused",
            "Landlock ABI 3 (truncate)",
            false,
        );
    }
    if abi >= 4 {
        loss(
            "TCP Fast Open sends limited to the policy's ports",
            if caps.seccomp {
                "Landlock's TCP connect rule does not see sendto/sendmsg with MSG_FASTOPEN; seccomp refuses MSG_FASTOPEN"
            } else {
                "Landlock's TCP connect rule does not see MSG_FASTOPEN, and seccomp is not available to refuse it"
            },
            !caps.seccomp,
        );
    }
    if abi < 5 {
        loss(
            "ioctl on devices refused",
            "Landlock ABI 5 (ioctl_dev)",
            false,
        );
    }
    if abi < 6 {
        loss(
            "signals and abstract unix sockets scoped to the sandbox",
            if caps.seccomp && !plan.network.unix_sockets {
                "Landlock ABI 6 (scopes): the server can signal processes of its user outside the sandbox; abstract unix sockets are closed by seccomp refusing socket(AF_UNIX)"
            } else {
                "Landlock ABI 6 (scopes): the server can signal processes of its user and connect to abstract unix sockets outside the sandbox"
            },
            false,
        );
    }
}

/// What Landlock (at this ABI, or missing) and seccomp leave of the
/// network rules.
fn socket_losses(plan: &SandboxPlan, caps: &Capabilities, out: &mut Vec<Loss>) {
    let abi = caps.abi();
    let n = &plan.network;
    let mut loss = |wants: &str, missing: String, fatal: bool| {
        out.push(Loss {
            wants: wants.into(),
            missing,
            fatal,
        })
    };
    if abi < 4 {
        let landlock = if abi == 0 {
            "Landlock (this kernel has none)".to_string()
        } else {
            "Landlock ABI 4 (network)".to_string()
        };
        loss(
            "TCP connect and bind limited to the policy's ports",
            if caps.seccomp {
                format!(
                    "{landlock}; all TCP/IP sockets are refused by seccomp instead (a policy granting TCP ports cannot start: remove its tcp_connect and tcp_bind ports)"
                )
            } else {
                format!("{landlock}, and seccomp is not available to close TCP")
            },
            !n.tcp_connect.is_empty() || !n.tcp_bind.is_empty() || !caps.seccomp,
        );
    }
    // What seccomp closes in Landlock's place: lost, and fatal, without it.
    let mut by_seccomp = |wants: &str, with: &str, without: &str| {
        let missing = if caps.seccomp { with } else { without };
        loss(wants, missing.into(), !caps.seccomp);
    };
    if !n.unix_sockets && abi < 9 {
        by_seccomp(
            "no connections to pathname unix sockets outside the sandbox",
            "Landlock ABI 9 (resolve_unix); closed instead by seccomp refusing socket(AF_UNIX) (socketpair() still works; unix sockets inside the roots cannot be used either)",
            "Landlock ABI 9 (resolve_unix), and seccomp is not available to close it",
        );
    }
    if !n.udp {
        by_seccomp(
            "no UDP, raw, packet or other non-TCP sockets",
            "not covered by Landlock at any ABI; closed by seccomp: socket() allows only unix, TCP and netlink-route sockets, io_uring is refused",
            "not covered by Landlock, and seccomp is not available",
        );
    }
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

/// What decides the rows: the rung, the kernel, the plan.
#[derive(Debug, Clone, Copy)]
struct Here {
    /// The rung (on a machine that gives none, the one the plan would get
    /// with what it has).
    rung: Rung,
    abi: u32,
    seccomp: bool,
    overlay: bool,
    machine_root: bool,
    /// The plan lists domains, and a design holds them here.
    domains: bool,
}

/// Every class of escape of the threat model, with the layer that closes it
/// for `plan` on a machine with `caps` (`caps.namespaces` should be probed:
/// see [`super::probe_with_namespaces`]; unprobed counts as unavailable).
pub fn coverage(plan: &SandboxPlan, caps: &Capabilities) -> Vec<Coverage> {
    let rung = rung(plan, caps).unwrap_or(if caps.abi() > 0 {
        Rung::LandlockSeccomp
    } else {
        Rung::ViewSeccomp
    });
    let ns = caps.namespaces.as_ref();
    let h = Here {
        rung,
        abi: caps.abi(),
        seccomp: caps.seccomp,
        overlay: rung.namespaces() && ns.is_some_and(|n| n.overlay),
        machine_root: ns.is_some_and(|n| n.root),
        domains: plan.network.domains.is_some() && domain_rung_here(plan, caps).is_ok(),
    };
    let mut out = filesystem_rows(h);
    out.extend(process_rows(h));
    out.extend(network_rows(h));
    out.insert(
        out.iter()
            .position(|r| r.class == "network")
            .map_or(out.len(), |i| i + 1),
        domains_row(plan, caps, h),
    );
    out.extend(trust_rows(h));
    out.push(resources_row(plan, caps, h));
    out
}

fn row(class: &'static str, closed: Closed, how: &str) -> Coverage {
    Coverage {
        class,
        closed,
        how: how.to_string(),
    }
}

/// Files: content, metadata, names, code run from roots.
fn filesystem_rows(h: Here) -> Vec<Coverage> {
    use Closed::*;
    let c = "reading and writing files outside the roots";
    let m = "metadata outside the roots and of read-only roots (chmod, chown, times, extended attributes, ACLs)";
    let e = "existence and names of files outside the roots (stat, inotify)";
    let x = "running code from roots (exec_in_roots = false)";
    let memfd = if h.machine_root {
        "memfds are not executable (vm.memfd_noexec = 2)"
    } else {
        "memfds stay executable (vm.memfd_noexec needs rootfence to run as the machine's root)"
    };
    // Under a view, with Landlock or without, the view alone closes these.
    let view_metadata = row(
        m,
        Yes,
        "the server's own filesystem view: what is not granted is not there, read-only grants are read-only mounts",
    );
    let view_existence = row(e, Yes, "the server's own filesystem view");
    match h.rung {
        Rung::Full => vec![
            row(
                c,
                Yes,
                "Landlock (every filesystem right of the running ABI handled); the view holds only the grants",
            ),
            view_metadata.clone(),
            view_existence.clone(),
            row(
                x,
                Partly,
                &format!(
                    "Landlock refuses execve; roots and writable grants are mounted noexec (no loader tricks); {memfd}; code the server writes into its own memory (an interpreter, a JIT) is not a boundary, and stays confined"
                ),
            ),
        ],
        Rung::LandlockSeccomp => vec![
            row(
                c,
                if h.abi > 0 { Yes } else { No },
                "Landlock (every filesystem right of the running ABI handled)",
            ),
            row(
                m,
                Partly,
                "seccomp refuses extended attributes (POSIX ACLs), chown and setuid/setgid/world-writable modes; other mode bits and timestamps of files the server's user owns stay changeable (needs namespaces)",
            ),
            row(
                e,
                No,
                "Landlock does not rule on stat or inotify_add_watch (needs namespaces)",
            ),
            row(
                x,
                Partly,
                "Landlock refuses execve only: the dynamic loader and memfd execution still run code from roots (it stays confined)",
            ),
        ],
        Rung::ViewSeccomp => vec![
            row(
                c,
                Yes,
                "no Landlock: the server's own filesystem view holds only the grants, read-only grants are read-only mounts",
            ),
            view_metadata.clone(),
            view_existence.clone(),
            row(
                x,
                Partly,
                &format!(
                    "no Landlock: roots and writable grants are mounted noexec (execve and the loader refused); {memfd}; code the server writes into its own memory is not a boundary, and stays confined"
                ),
            ),
        ],
    }
}

/// Processes: lifetime, terminal, signals, limits of others, /proc.
fn process_rows(h: Here) -> Vec<Coverage> {
    use Closed::*;
    let ns = h.rung.namespaces();
    let mut out = vec![
        if ns {
            row(
                "processes outliving the server, its generation or the session",
                Yes,
                "PID namespace: when the server exits its init exits and the kernel ends every process in it, before rootfence sees the exit",
            )
        } else {
            row(
                "processes outliving the server, its generation or the session",
                Partly,
                "rootfence is the subreaper of everything the server starts and ends what is left when the server exits; if rootfence itself is killed with SIGKILL, processes that left the server's process group survive (needs namespaces)",
            )
        },
        row(
            "the user's terminal",
            Yes,
            "exec relays a terminal through pipes (the server never holds it); run gives the server pipes only; seccomp refuses TIOCSTI and TIOCLINUX",
        ),
    ];
    let signals = "signals and abstract unix sockets outside the sandbox";
    out.push(match (h.rung, h.abi >= 6) {
        (Rung::Full, true) => row(signals, Yes, "Landlock scopes (ABI 6); the PID namespace also hides every outside process"),
        (Rung::LandlockSeccomp, true) => row(signals, Yes, "Landlock scopes (ABI 6)"),
        (Rung::ViewSeccomp, _) => row(signals, Yes, "no Landlock: the PID namespace hides every outside process, and a network namespace of its own the host's abstract unix sockets"),
        (Rung::Full, false) => row(signals, Partly, "the PID namespace hides every outside process; abstract unix sockets need Landlock ABI 6 (closed by seccomp refusing socket(AF_UNIX) unless the policy allows unix sockets)"),
        (Rung::LandlockSeccomp, false) => row(signals, No, "needs Landlock ABI 6"),
    });
    out.push(if ns {
        row("limits, priority and scheduling of other processes", Yes, "PID namespace: no outside process can be named")
    } else {
        row("limits, priority and scheduling of other processes", Yes, "seccomp refuses prlimit64, sched_set*, ioprio_set and setpriority on any process but the caller")
    });
    out.push(if ns {
        row("other processes in /proc", Yes, "a /proc of the server's own PID namespace (hidepid=ptraceable), /proc/sys masked")
    } else {
        row("other processes in /proc", Partly, "Landlock grants only the server's own /proc/self (its children get none); pids of other processes can be probed with stat or kill(pid, 0)")
    });
    out
}

/// Sockets and IPC.
fn network_rows(h: Here) -> Vec<Coverage> {
    use Closed::*;
    let net = "network";
    let network = match h.rung {
        _ if !h.seccomp => row(net, No, "seccomp is not available"),
        _ if h.domains => row(
            net,
            Yes,
            "the policy opens no port: TCP reaches rootfence's proxy only (see network by domain); seccomp refuses UDP, raw and other families and MSG_FASTOPEN",
        ),
        Rung::ViewSeccomp => row(
            net,
            Partly,
            "no Landlock: TCP is refused whole by seccomp (a policy granting TCP ports cannot start); seccomp refuses UDP, raw and other families",
        ),
        _ if h.abi >= 4 => row(
            net,
            Yes,
            "Landlock TCP connect and bind by port; seccomp refuses UDP, raw and other families and MSG_FASTOPEN; listen() only on a socket bound to a granted port (rootfence's supervisor)",
        ),
        _ => row(
            net,
            Partly,
            "Landlock before ABI 4 cannot rule on TCP ports: every TCP/IP socket is refused by seccomp",
        ),
    };
    let ipc = row(
        "System V IPC and POSIX message queues",
        if h.seccomp { Yes } else { No },
        if h.rung.namespaces() {
            "seccomp refuses every call; the server also has its own IPC namespace"
        } else {
            "seccomp refuses every call"
        },
    );
    let unix = "pathname unix sockets outside the roots";
    let unix_row = match h.rung {
        Rung::ViewSeccomp => row(
            unix,
            Yes,
            "not in the view; seccomp refuses socket(AF_UNIX) and datagram socketpair() (unless the policy allows unix sockets)",
        ),
        _ if h.abi >= 9 => row(unix, Yes, "Landlock resolve_unix (ABI 9)"),
        _ => row(
            unix,
            if h.seccomp { Yes } else { No },
            "seccomp refuses socket(AF_UNIX) and datagram socketpair() (unless the policy allows unix sockets)",
        ),
    };
    let locks = row(
        "locks on files it may only read (flock, record locks), which would make the user's own programs wait",
        if h.seccomp { Partly } else { No },
        if h.seccomp {
            "rootfence's supervisor: a lock on a file opened only for reading succeeds and locks nothing; on one opened for writing it takes flock and open-file-description locks itself, on the descriptor it checked; POSIX record locks there are the kernel's, run after the check, and a process of several threads is watched from then on: one holding a lock on a file it may only read (a second thread swapped descriptors in between) is killed, found under the call's own number within milliseconds of the call, and at most 100 ms after a lock the kernel grants late"
        } else {
            "seccomp is not available"
        },
    );
    vec![network, locks, ipc, unix_row]
}

/// The class of network by domain: on a plan listing domains, the design
/// it gets here; on one listing none, that it reaches no host by name,
/// and the design a list would get.
fn domains_row(plan: &SandboxPlan, caps: &Capabilities, h: Here) -> Coverage {
    let class =
        "network by domain (allow_domains): hosts not listed, direct connections, UDP and DNS";
    let proxy = "the proxy resolves names itself and refuses unlisted hosts (403 naming the rule) and this machine's loopback unless listed; seccomp refuses UDP, raw and other families; what TLS carries inside a tunnel is not seen (a front end serving many names on one address can be asked for an unlisted one)";
    let (closed, how) = match domain_rung_here(plan, caps) {
        _ if !h.seccomp => (Closed::No, "seccomp is not available".to_string()),
        Ok(DomainRung::NetworkNamespace) => (
            Closed::Partly,
            format!(
                "the server's own network namespace holds only loopback and rootfence's proxy: a direct connection, --noproxy or DNS reaches nothing{}; {proxy}",
                if h.rung.landlock() && h.abi >= 4 {
                    "; Landlock allows TCP connect to the proxy's port only"
                } else {
                    ""
                }
            ),
        ),
        Ok(DomainRung::SupervisedConnect) => (
            Closed::Partly,
            format!(
                "{}Landlock allows the server no TCP port, and rootfence's seccomp supervisor connects its TCP sockets itself, to the proxy's address only (read once from the server, connected on rootfence's copy); {proxy}; other processes of this machine can use the proxy's loopback port too",
                match (h.rung.namespaces(), &caps.network_namespace) {
                    (true, Some(n)) =>
                        format!("no network namespace of its own here ({}): ", n.why_not()),
                    _ => String::new(),
                }
            ),
        ),
        Err(missing) => (
            Closed::No,
            format!("rootfence refuses to start a server listing domains: {missing}"),
        ),
    };
    if plan.network.domains.is_none() {
        return Coverage {
            class,
            closed: Closed::Yes,
            how: format!(
                "the policy lists no domains: no proxy, the server reaches no host by name (see network); with allow_domains here: {how}"
            ),
        };
    }
    Coverage { class, closed, how }
}

/// What rootfence and tools outside trust: caches, VCS metadata, its own
/// files, kernel interfaces.
fn trust_rows(h: Here) -> Vec<Coverage> {
    use Closed::*;
    let vcs = "version-control and editor metadata in writable roots";
    vec![
        if h.overlay {
            row(
                "shared caches run later outside (npm, uv)",
                Yes,
                "written only through a private overlay layer, discarded with the scratch directory; npx and uvx still run what the cache holds",
            )
        } else {
            row(
                "shared caches run later outside (npm, uv)",
                Yes,
                "read-only; the runtime gets an empty private cache instead (npx -y and uvx then need the network for packages)",
            )
        },
        if h.rung.namespaces() {
            row(
                vcs,
                Partly,
                "in an existing .git (or .hg) everything the VCS does not write in normal work (config, hooks, info, modules, worktrees, commondir, ...) and existing .envrc, .vscode and .idea are read-only in the view; metadata the server creates where there was none is reported when it ends ([roots] vcs = \"refuse\" closes it)",
            )
        } else {
            row(
                vcs,
                No,
                "Landlock cannot make part of a granted tree read-only: warned at start; metadata the server creates is reported when it ends; [roots] vcs = \"refuse\" closes it",
            )
        },
        row(
            "files rootfence trusts (policy, audit file, its cache and state)",
            Yes,
            "denied as roots under every name, read and appended without following symlinks, refused with more than one link; remembered answers bound to their command by a keyed MAC",
        ),
        row(
            "kernel interfaces as roots (/proc, /sys, /dev, cgroups, debugfs, ...)",
            Yes,
            "refused by filesystem type on the open handle and by path",
        ),
    ]
}

/// The class of the resources row, as `doctor` and the README name it.
pub const RESOURCES: &str =
    "the machine's resources (processes, threads, memory, open files, scratch space, inotify)";

/// How each bound of `plan`'s `[resources]` applies on a machine with
/// `caps` (`caps.namespaces` and `caps.cgroup` probed, see
/// [`super::probe_with_namespaces`]), on the rung the plan gets there.
pub fn resources_here(plan: &SandboxPlan, caps: &Capabilities) -> Vec<resources::Applied> {
    let namespaces = rung(plan, caps)
        .unwrap_or(if caps.abi() > 0 {
            Rung::LandlockSeccomp
        } else {
            Rung::ViewSeccomp
        })
        .namespaces();
    let mut rows = resources::applied(&plan.resources, &resources_where(caps, namespaces));
    if plan.home_store.is_some() {
        rows.push(resources::store_row());
    }
    rows
}

/// Where a server runs here, as far as `[resources]` is concerned.
fn resources_where(caps: &Capabilities, namespaces: bool) -> resources::Where {
    let ns = caps.namespaces.as_ref();
    let (cgroup, no_cgroup) = match &caps.cgroup {
        Some(c) => (c.controllers, c.why.clone().unwrap_or_default()),
        None => (super::cgroup::Controllers::NONE, "not probed".to_string()),
    };
    resources::Where {
        namespaces,
        own_user_namespace: ns.is_some_and(|n| n.own_user_namespace),
        nproc_per_namespace: super::nsprobe::kernel_at_least(&caps.kernel, (5, 14)),
        pid_max_per_namespace: ns.is_some_and(|n| n.pid_max),
        tmpfs_user_xattrs: super::nsprobe::kernel_at_least(&caps.kernel, (6, 6)),
        cgroup,
        no_cgroup,
        user_inotify: resources::user_inotify(),
        inotify_namespace: ns.is_some_and(|n| n.inotify),
    }
}

/// The machine's resources: what `[resources]` bounds here.
fn resources_row(plan: &SandboxPlan, caps: &Capabilities, h: Here) -> Coverage {
    let at = resources_where(caps, h.rung.namespaces());
    let applied = resources::applied(&plan.resources, &at);
    let how: Vec<String> = applied
        .iter()
        .map(|a| format!("{}: {}", a.what, a.how))
        .collect();
    Coverage {
        class: RESOURCES,
        closed: if applied.iter().all(|a| a.bounded) {
            Closed::Yes
        } else if applied.iter().any(|a| a.bounded) {
            Closed::Partly
        } else {
            Closed::No
        },
        how: how.join("; "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::Policy;
    use crate::runtime::{CommandSpec, HostEnv};
    use crate::sandbox::nsprobe::NetnsSupport;
    use crate::sandbox::probe::LandlockStatus;

    fn plan(tcp: bool) -> SandboxPlan {
        let policy = Policy::builtin(None).unwrap();
        let command = CommandSpec::with_needs("/bin/true", vec![]);
        let mut p = crate::plan::build(&policy, vec![], vec![], command, &HostEnv::default());
        if tcp {
            p.network.tcp_connect = vec![443];
        }
        p
    }

    fn ns(available: bool) -> NamespaceSupport {
        NamespaceSupport {
            available,
            overlay: available,
            root: true,
            own_user_namespace: false,
            pid_max: available,
            inotify: available,
            why: (!available).then(|| "refused".into()),
        }
    }

    fn caps(abi: u32, seccomp: bool) -> Capabilities {
        Capabilities {
            kernel: "6.18.0".into(),
            landlock: if abi == 0 {
                LandlockStatus::NotBuilt
            } else {
                LandlockStatus::Available { abi }
            },
            seccomp,
            namespaces: None,
            network_namespace: None,
            cgroup: None,
        }
    }

    fn fatal(l: &[Loss]) -> Vec<&str> {
        l.iter()
            .filter(|l| l.fatal)
            .map(|l| l.wants.as_str())
            .collect()
    }

    #[test]
    fn no_landlock_is_fatal_by_default_and_says_the_fix_in_a_sentence() {
        let l = losses(&plan(false), &caps(0, true));
        assert_eq!(fatal(&l), ["filesystem confinement"]);
        let text = l[0].to_string();
        assert!(
            text.starts_with("filesystem confinement: this kernel was built without Landlock"),
            "{text}"
        );
        assert!(text.contains("landlock = \"prefer\""), "{text}");
    }

    #[test]
    fn the_ladder() {
        let mut c = caps(7, true);
        c.namespaces = Some(ns(true));
        let mut p = plan(false);
        assert_eq!(rung(&p, &c), Ok(Rung::Full));
        p.namespaces = NamespaceMode::Off;
        assert_eq!(rung(&p, &c), Ok(Rung::LandlockSeccomp));
        p.namespaces = NamespaceMode::Auto;
        c.namespaces = Some(ns(false));
        assert_eq!(rung(&p, &c), Ok(Rung::LandlockSeccomp));
        p.namespaces = NamespaceMode::Require;
        assert!(rung(&p, &c).is_err());
        p.namespaces = NamespaceMode::Auto;
        let mut c0 = caps(0, true);
        c0.namespaces = Some(ns(true));
        assert!(rung(&p, &c0).is_err(), "no Landlock is refused by default");
        p.landlock = LandlockMode::Prefer;
        assert_eq!(rung(&p, &c0), Ok(Rung::ViewSeccomp));
        assert!(fatal(&losses(&p, &c0)).is_empty());
        c0.namespaces = Some(ns(false));
        let e = rung(&p, &c0).unwrap_err();
        assert!(matches!(e, NoRung::Neither { .. }), "{e:?}");
        assert!(e.to_string().contains("needs namespaces: refused;"), "{e}");
        assert_eq!(fatal(&losses(&p, &c0)), ["filesystem confinement"]);
    }

    #[test]
    fn without_landlock_tcp_ports_cannot_start() {
        let mut c0 = caps(0, true);
        c0.namespaces = Some(ns(true));
        let mut p = plan(true);
        p.landlock = LandlockMode::Prefer;
        assert!(!fatal(&losses(&p, &c0)).is_empty());
        let rows = coverage(&p, &c0);
        let net = rows.iter().find(|r| r.class == "network").unwrap();
        assert_eq!(net.closed, Closed::Partly);
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

    #[test]
    fn network_by_domain_takes_the_namespace_where_it_can_and_needs_abi_4_elsewhere() {
        use DomainRung::*;
        let no = || Err(NoNetns::Refused("refused".to_string()));
        assert_eq!(domain_rung(Rung::Full, Ok(()), 7), Ok(NetworkNamespace));
        assert_eq!(domain_rung(Rung::Full, Ok(()), 1), Ok(NetworkNamespace));
        assert_eq!(domain_rung(Rung::Full, no(), 4), Ok(SupervisedConnect));
        assert_eq!(
            domain_rung(Rung::LandlockSeccomp, no(), 4),
            Ok(SupervisedConnect)
        );
        // Without Landlock only the namespace holds: never the supervised
        // design, which needs Landlock to refuse every TCP port.
        assert_eq!(
            domain_rung(Rung::ViewSeccomp, Ok(()), 0),
            Ok(NetworkNamespace)
        );
        let e = domain_rung(Rung::ViewSeccomp, no(), 0).unwrap_err();
        assert!(matches!(e, NoDomainRung::ViewWithoutNetns(_)), "{e:?}");
        let e = e.to_string();
        assert!(
            e.contains("view + seccomp rung") && e.contains("refused"),
            "{e}"
        );
        for (rung, netns) in [(Rung::Full, no()), (Rung::LandlockSeccomp, no())] {
            let e = domain_rung(rung, netns, 3).unwrap_err();
            assert!(matches!(e, NoDomainRung::Neither { abi: 3, .. }), "{e:?}");
            let e = e.to_string();
            assert!(
                e.contains("Landlock is at ABI 3") && e.contains("Linux 6.7"),
                "{e}"
            );
        }
    }

    #[test]
    fn a_plan_listing_domains_where_neither_design_holds_cannot_start() {
        let mut p = plan(false);
        p.network.domains = Some(Default::default());
        let netns = |available| NetnsSupport {
            available,
            why: (!available).then(|| "refused".into()),
        };
        let mut c = caps(3, true);
        c.namespaces = Some(ns(true));
        c.network_namespace = Some(netns(true));
        assert!(fatal(&losses(&p, &c)).is_empty());
        c.network_namespace = Some(netns(false));
        assert_eq!(
            fatal(&losses(&p, &c)),
            ["network by domain (allow_domains) kept to rootfence's proxy"]
        );
        let row = |p: &SandboxPlan, c: &Capabilities| {
            coverage(p, c)
                .into_iter()
                .find(|r| r.class.starts_with("network by domain"))
                .unwrap()
        };
        assert_eq!(row(&p, &c).closed, Closed::No);
        // A plan listing none loses nothing, and says what a list would get.
        let none = plan(false);
        assert!(fatal(&losses(&none, &c)).is_empty());
        let r = row(&none, &c);
        assert_eq!(r.closed, Closed::Yes);
        assert!(
            r.how.starts_with("the policy lists no domains"),
            "{}",
            r.how
        );
        // ABI 4: supervised.
        let mut c4 = caps(4, true);
        c4.namespaces = Some(ns(true));
        c4.network_namespace = Some(netns(false));
        assert!(fatal(&losses(&p, &c4)).is_empty());
        let network = coverage(&p, &c4)
            .into_iter()
            .find(|r| r.class == "network")
            .unwrap();
        assert!(
            network.how.contains("TCP reaches rootfence's proxy only"),
            "{}",
            network.how
        );
        assert!(
            row(&p, &c4).how.contains("supervisor connects"),
            "{}",
            row(&p, &c4).how
        );
        // No Landlock: the view + seccomp rung holds it in the namespace
        // only.
        let mut p0 = p.clone();
        p0.landlock = LandlockMode::Prefer;
        let mut c0 = caps(0, true);
        c0.namespaces = Some(ns(true));
        c0.network_namespace = Some(netns(true));
        assert!(fatal(&losses(&p0, &c0)).is_empty());
        assert!(
            row(&p0, &c0)
                .how
                .starts_with("the server's own network namespace")
        );
        c0.network_namespace = Some(netns(false));
        assert!(!fatal(&losses(&p0, &c0)).is_empty());
        // Nor is that rung had without a network namespace, domains or not.
        let mut none0 = none.clone();
        none0.landlock = LandlockMode::Prefer;
        let e = rung(&none0, &c0).unwrap_err();
        assert!(
            matches!(
                &e,
                NoRung::Neither {
                    namespaces: NoNamespaces::Network(_),
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(
            e.to_string()
                .contains("a network namespace of the server's own among them"),
            "{e}"
        );
    }

    #[test]
    fn every_rung_lists_every_class_and_resources_are_a_row() {
        let mut c = caps(7, true);
        c.namespaces = Some(ns(true));
        let mut p = plan(false);
        let full = coverage(&p, &c);
        p.namespaces = NamespaceMode::Off;
        let ls = coverage(&p, &c);
        let mut c0 = caps(0, true);
        c0.namespaces = Some(ns(true));
        p.namespaces = NamespaceMode::Auto;
        p.landlock = LandlockMode::Prefer;
        let vs = coverage(&p, &c0);
        let classes = |v: &[Coverage]| v.iter().map(|c| c.class).collect::<Vec<_>>();
        assert_eq!(classes(&full), classes(&ls));
        assert_eq!(classes(&full), classes(&vs));
        let res = full
            .iter()
            .find(|r| r.class.starts_with("the machine's resources"))
            .unwrap();
        assert_eq!(res.closed, Closed::Partly);
        assert!(res.how.contains("kernel.pid_max"), "{}", res.how);
        let res = ls
            .iter()
            .find(|r| r.class.starts_with("the machine's resources"))
            .unwrap();
        assert!(
            res.how.contains("not bounded without namespaces"),
            "{}",
            res.how
        );
    }

    #[test]
    fn with_a_cgroup_and_namespaces_every_resource_is_bounded() {
        let mut c = caps(7, true);
        c.namespaces = Some(ns(true));
        c.cgroup = Some(super::super::cgroup::CgroupSupport {
            controllers: super::super::cgroup::Controllers::BOTH,
            at: Vec::new(),
            why: None,
        });
        let mut p = plan(false);
        let res = |p: &SandboxPlan| {
            coverage(p, &c)
                .into_iter()
                .find(|r| r.class == RESOURCES)
                .unwrap()
        };
        let full = res(&p);
        assert_eq!(full.closed, Closed::Yes, "{}", full.how);
        assert!(full.how.contains("pids.max"), "{}", full.how);
        assert_eq!(resources_here(&p, &c).len(), 5);
        // Without namespaces the cgroup still bounds processes and memory;
        // scratch space is open, inotify instances and watches counted by
        // the supervisor.
        p.namespaces = NamespaceMode::Off;
        let ls = res(&p);
        assert_eq!(ls.closed, Closed::Partly, "{}", ls.how);
        assert!(ls.how.contains("pids.max"), "{}", ls.how);
        assert!(
            ls.how.contains("counted by rootfence's supervisor"),
            "{}",
            ls.how
        );
        assert!(ls.how.contains("scratch space"), "{}", ls.how);
    }
}
