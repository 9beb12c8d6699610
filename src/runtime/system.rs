//! The system rule: what every program on this machine reads to start.

use std::path::{Path, PathBuf};

use super::{Collect, PROC_SELF, Rights, Rule};

/// System trees every server reads and executes from.
pub const TREES: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// `/etc` entries needed for the dynamic loader, DNS, TLS, time and locale.
const ETC_FILES: &[&str] = &[
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/resolv.conf",
    "/etc/hosts",
    "/etc/host.conf",
    "/etc/nsswitch.conf",
    "/etc/gai.conf",
    "/etc/services",
    "/etc/protocols",
    "/etc/passwd",
    "/etc/group",
    "/etc/ssl",
    "/etc/ca-certificates",
    "/etc/pki",
    "/etc/crypto-policies",
    "/etc/locale.alias",
    "/etc/mime.types",
    "/etc/alternatives",
    // git fails on a system configuration it may not read.
    "/etc/gitconfig",
];

/// Kernel information files commonly read at start-up (CPU count, memory).
const INFO_FILES: &[&str] = &[
    "/proc/cpuinfo",
    "/proc/meminfo",
    "/proc/stat",
    "/proc/uptime",
    "/proc/loadavg",
    "/proc/version",
    "/sys/devices/system/cpu",
    "/sys/fs/cgroup",
];

/// Devices: path, rights, required.
const DEVICES: &[(&str, Rights, bool)] = &[
    ("/dev/null", Rights::RW, true),
    ("/dev/zero", Rights::R, false),
    ("/dev/full", Rights::RW, false),
    ("/dev/random", Rights::R, false),
    ("/dev/urandom", Rights::R, true),
];

/// Whether the system rule lets every server read `path`: it is inside
/// one of the system trees or the `/etc` entries above. Pure: `path` is
/// taken as given (pass its canonical form to judge where it leads).
pub fn reads(path: &Path) -> bool {
    TREES
        .iter()
        .chain(ETC_FILES)
        .any(|t| crate::roots::within(path, Path::new(t)))
}

/// Grant what the system rule grants.
pub fn collect(c: &mut Collect) {
    for t in TREES {
        c.add(
            t,
            Rights::RX,
            Rule::System,
            "system libraries and tools",
            true,
        );
    }
    for f in ETC_FILES {
        c.add(
            f,
            Rights::R,
            Rule::System,
            "loader, DNS, TLS, time and locale configuration",
            true,
        );
    }
    for f in INFO_FILES {
        c.add(
            f,
            Rights::R,
            Rule::System,
            "CPU and memory information",
            true,
        );
    }
    for (d, rights, required) in DEVICES {
        c.add(d, *rights, Rule::System, "device", !required);
    }
    c.add(
        PathBuf::from(PROC_SELF),
        Rights::R,
        Rule::System,
        "the server's own /proc entry (opened in the server process itself)",
        false,
    );
}
