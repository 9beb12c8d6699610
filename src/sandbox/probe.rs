//! Probing the running kernel: its Landlock ABI, seccomp, and (through
//! [`super::nsprobe`]) whether the server can have namespaces here.

use serde::Serialize;

use super::cgroup::CgroupSupport;
use super::nsprobe::{NamespaceSupport, NetnsSupport};

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

impl LandlockStatus {
    /// Why this status gives no Landlock (`None`: it does).
    pub fn missing(&self) -> Option<super::ladder::NoLandlock> {
        use super::ladder::NoLandlock;
        match self {
            LandlockStatus::NotBuilt => Some(NoLandlock::NotBuilt),
            LandlockStatus::Disabled => Some(NoLandlock::Disabled),
            LandlockStatus::Error { message } => Some(NoLandlock::Error {
                message: message.clone(),
            }),
            LandlockStatus::Available { .. } => None,
        }
    }
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
    /// Whether the server can also get a network namespace of its own
    /// (network by domain's first design), found by a test launch: only
    /// [`probe_with_namespaces`] fills it.
    pub network_namespace: Option<NetnsSupport>,
    /// The controllers a server's own cgroup gets here (found by making
    /// one: only [`probe_with_namespaces`] fills it).
    pub cgroup: Option<CgroupSupport>,
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
    let kernel = super::nsprobe::kernel_release();
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
    Capabilities {
        kernel,
        landlock,
        seccomp: seccomp_errno(),
        namespaces: None,
        network_namespace: None,
        cgroup: None,
    }
}

/// Whether seccomp filters can return an errno: asked of the kernel
/// (`SECCOMP_GET_ACTION_AVAIL`, Linux 4.14), which works inside another
/// sandbox too (where `/proc/sys` may be hidden); else as
/// `/proc/sys/kernel/seccomp/actions_avail` says.
fn seccomp_errno() -> bool {
    const SECCOMP_GET_ACTION_AVAIL: libc::c_uint = 2;
    const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
    let action = SECCOMP_RET_ERRNO;
    // SAFETY: the kernel reads one u32 from `action`.
    let r = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            SECCOMP_GET_ACTION_AVAIL,
            0,
            &action as *const u32,
        )
    };
    r == 0
        || std::fs::read_to_string("/proc/sys/kernel/seccomp/actions_avail")
            .is_ok_and(|s| s.contains("errno"))
}

/// [`probe`], plus the test launches that find whether the server can get
/// its namespaces and a network namespace, and the probe cgroup that finds
/// whether it can get a cgroup of its own (a millisecond or two; `doctor`
/// probes on purpose). What the test launches find is remembered for this
/// boot ([`super::machine`]) in place of what launches found refused.
pub fn probe_with_namespaces() -> Capabilities {
    let mut c = probe();
    let ns = namespaces().clone();
    let net = network_namespace().clone();
    super::machine::update(|r| {
        r.launch = None;
        r.netns_refused = None;
        r.namespaces = Some(ns.clone());
        r.network_namespace = Some(net.clone());
    });
    c.namespaces = Some(ns);
    c.network_namespace = Some(net);
    c.cgroup = Some(super::cgroup::probed().support());
    c
}

/// [`probe`], plus whether the server can get its namespaces and a
/// network namespace as this boot's record says ([`super::machine`]:
/// what a test launch or a launch found), probed (and recorded) only where
/// it says nothing; and the cgroup place. For `explain` and `learn`.
pub fn probe_remembered() -> Capabilities {
    let mut c = probe();
    let r = super::machine::record();
    let (ns, net) = (r.namespace_support(), r.netns_support());
    let probed = ns.is_none() || net.is_none();
    let ns = ns.unwrap_or_else(|| namespaces().clone());
    let net = net.unwrap_or_else(|| network_namespace().clone());
    if probed {
        super::machine::update(|r| {
            r.namespaces.get_or_insert_with(|| ns.clone());
            r.network_namespace.get_or_insert_with(|| net.clone());
        });
    }
    c.namespaces = Some(ns);
    c.network_namespace = Some(net);
    c.cgroup = Some(super::cgroup::place().support());
    c
}

/// Namespace support, found once per process by a test launch (for
/// `doctor`, and `explain` where this boot's record says nothing). A
/// launch does not ask: it tries, and (with `namespaces = "auto"`) falls
/// back when the kernel refuses.
fn namespaces() -> &'static NamespaceSupport {
    static ONCE: std::sync::OnceLock<NamespaceSupport> = std::sync::OnceLock::new();
    ONCE.get_or_init(super::nsprobe::probe_namespaces)
}

/// Network namespace support, found once per process by a test launch
/// (for `doctor`, and `explain` or a launch with `allow_domains` where
/// this boot's record says nothing).
pub fn network_namespace() -> &'static NetnsSupport {
    static ONCE: std::sync::OnceLock<NetnsSupport> = std::sync::OnceLock::new();
    ONCE.get_or_init(super::nsprobe::probe_network_namespace)
}
