//! `[resources]`: what a server may take of the machine, and how each bound
//! is applied where it runs.
//!
//! This machine kind has no delegated cgroup, so the bounds are the
//! kernel's per-process limits and the server's own namespaces:
//!
//! - processes and threads: `RLIMIT_NPROC`, which the kernel counts per
//!   user *and user namespace* (Linux 5.14 and later). In the server's own
//!   user namespace (rootfence not root) it counts the server's processes
//!   only. The machine's root is exempt from it, and root of another user
//!   namespace would have it count that whole namespace, so a server started
//!   by root is bounded by its PID namespace's `kernel.pid_max` instead
//!   (Linux 6.14 and later). Without namespaces it is not bounded: the limit
//!   would count every process of the user on the machine and fail the
//!   server for them;
//! - memory: `RLIMIT_DATA` of each process (heap and private writable
//!   mappings; address space merely reserved, as V8 and wasm do, does not
//!   count);
//! - open files: `RLIMIT_NOFILE` of each process;
//! - scratch and private layers: a `tmpfs` of a bounded size (and number of
//!   files) in the server's view, holding its `TMPDIR` and (Linux 6.6 and
//!   later, whose `tmpfs` keeps the user extended attributes overlayfs
//!   needs) the private layers' upper directories; without namespaces the
//!   scratch directory is on the host's disk and not bounded.
//!
//! [`bounds`] is the pure decision; the child applies it ([`super::child`],
//! [`super::mount`]).

use serde::Serialize;

use super::nsprobe::kernel_at_least;
use crate::policy::ResourcesSection;

/// Where the server runs, as far as the bounds are concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Where {
    /// The server gets its own namespaces.
    pub namespaces: bool,
    /// In them, a user namespace of its own (rootfence is not root).
    pub own_user_namespace: bool,
    /// The kernel counts `RLIMIT_NPROC` per user namespace (Linux 5.14).
    pub nproc_per_namespace: bool,
    /// The PID namespace's `kernel.pid_max` is its own (Linux 6.14).
    pub pid_max_per_namespace: bool,
    /// `tmpfs` keeps user extended attributes (Linux 6.6), which overlayfs
    /// needs of its upper layer in a user namespace.
    pub tmpfs_user_xattrs: bool,
}

impl Where {
    /// For a server with or without `namespaces`, started by `who` on a
    /// kernel of this `release` (`uname -r`).
    pub fn new(namespaces: bool, who: super::ids::Identity, release: &str) -> Where {
        Where {
            namespaces,
            own_user_namespace: !who.is_root(),
            nproc_per_namespace: kernel_at_least(release, (5, 14)),
            pid_max_per_namespace: super::nsprobe::pid_max_per_namespace(release),
            tmpfs_user_xattrs: kernel_at_least(release, (6, 6)),
        }
    }
}

/// The kernel reuses no pid below this in a PID namespace once it has
/// wrapped (`RESERVED_PIDS`), and `kernel.pid_max` is at least one more.
pub const RESERVED_PIDS: u64 = 300;

/// The sized scratch filesystem.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScratchSize {
    /// Bytes.
    pub bytes: u64,
    /// Files and directories.
    pub inodes: u64,
    /// The private layers' upper directories are in it too (else on the
    /// host's disk, with the scratch directory, and not bounded).
    pub holds_layers: bool,
}

/// Files and directories the scratch filesystem may hold per MiB.
pub const INODES_PER_MIB: u64 = 64;

/// The bounds a launch applies.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Bounds {
    /// Limits the server gets, soft and hard: (resource, value).
    pub rlimits: Vec<(libc::__rlimit_resource_t, u64)>,
    /// The PID namespace's `kernel.pid_max`.
    pub pid_max: Option<u64>,
    /// The scratch filesystem's size.
    pub scratch: Option<ScratchSize>,
}

/// The bounds of `r` for a server running `at`, given the hard limits
/// rootfence holds (`hard(resource)`: a server's limit is never above
/// rootfence's, which it could not raise).
pub fn bounds(
    r: &ResourcesSection,
    at: Where,
    hard: impl Fn(libc::__rlimit_resource_t) -> u64,
) -> Bounds {
    let mut b = Bounds::default();
    let mut limit = |res, want: u64| {
        if want > 0 {
            b.rlimits.push((res, want.min(hard(res))));
        }
    };
    limit(libc::RLIMIT_NOFILE, r.open_files);
    limit(libc::RLIMIT_DATA, r.memory_mb.saturating_mul(1 << 20));
    if r.processes > 0 && at.namespaces {
        if at.own_user_namespace && at.nproc_per_namespace {
            // The namespace's init is one of the user's processes there.
            limit(libc::RLIMIT_NPROC, r.processes + 1);
        } else if !at.own_user_namespace && at.pid_max_per_namespace {
            b.pid_max = Some(r.processes + RESERVED_PIDS);
        }
    }
    if r.scratch_mb > 0 && at.namespaces {
        b.scratch = Some(ScratchSize {
            bytes: r.scratch_mb.saturating_mul(1 << 20),
            inodes: r.scratch_mb.saturating_mul(INODES_PER_MIB).max(1024),
            holds_layers: at.tmpfs_user_xattrs,
        });
    }
    b
}

/// One bound of `[resources]` as it applies here, for `doctor`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Applied {
    /// What is bounded.
    pub what: &'static str,
    /// Whether it is bounded here.
    pub bounded: bool,
    /// How, or why not.
    pub how: String,
}

/// How each bound of `r` applies to a server running `at`.
pub fn applied(r: &ResourcesSection, at: Where) -> Vec<Applied> {
    let b = bounds(r, at, |_| u64::MAX);
    let has = |res| b.rlimits.iter().any(|(x, _)| *x == res);
    let off = |what, key: &str| Applied {
        what,
        bounded: false,
        how: format!("[resources] {key} = 0"),
    };
    let processes = if r.processes == 0 {
        off("processes and threads", "processes")
    } else if has(libc::RLIMIT_NPROC) {
        Applied {
            what: "processes and threads",
            bounded: true,
            how: format!(
                "{} at once (RLIMIT_NPROC in the server's own user namespace)",
                r.processes
            ),
        }
    } else if let Some(n) = b.pid_max {
        Applied {
            what: "processes and threads",
            bounded: true,
            how: format!(
                "{} to {} at once (the PID namespace's kernel.pid_max = {n}: root is exempt from RLIMIT_NPROC)",
                r.processes,
                n - 1
            ),
        }
    } else {
        Applied {
            what: "processes and threads",
            bounded: false,
            how: if !at.namespaces {
                "not bounded without namespaces (RLIMIT_NPROC would count every process of the user)".into()
            } else if at.own_user_namespace {
                "not bounded: this kernel counts RLIMIT_NPROC per user, not per user namespace (needs Linux 5.14)".into()
            } else {
                "not bounded: root is exempt from RLIMIT_NPROC, and this kernel's kernel.pid_max is the machine's, not the PID namespace's (needs Linux 6.14)".into()
            },
        }
    };
    let memory = if r.memory_mb == 0 {
        off("memory", "memory_mb")
    } else {
        Applied {
            what: "memory",
            bounded: true,
            how: format!(
                "{} MiB of data per process (RLIMIT_DATA); the server's total is not bounded (needs a delegated cgroup)",
                r.memory_mb
            ),
        }
    };
    let files = if r.open_files == 0 {
        off("open files", "open_files")
    } else {
        Applied {
            what: "open files",
            bounded: true,
            how: format!(
                "{} per process (RLIMIT_NOFILE, at most rootfence's own hard limit)",
                r.open_files
            ),
        }
    };
    let scratch = match b.scratch {
        _ if r.scratch_mb == 0 => off("scratch space", "scratch_mb"),
        Some(s) => Applied {
            what: "scratch space",
            bounded: true,
            how: format!(
                "{} MiB and {} files for TMPDIR{} (a tmpfs in the view)",
                r.scratch_mb,
                s.inodes,
                if s.holds_layers {
                    " and the private layers together"
                } else {
                    "; the private layers' writes are on the host's disk, not bounded (tmpfs keeps the extended attributes overlayfs needs from Linux 6.6)"
                }
            ),
        },
        None => Applied {
            what: "scratch space",
            bounded: false,
            how: "not bounded without namespaces (TMPDIR is a directory on the host's disk)".into(),
        },
    };
    vec![processes, memory, files, scratch]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section() -> ResourcesSection {
        ResourcesSection {
            processes: 64,
            memory_mb: 256,
            open_files: 100,
            scratch_mb: 8,
        }
    }

    fn at(namespaces: bool, own: bool) -> Where {
        Where {
            namespaces,
            own_user_namespace: own,
            nproc_per_namespace: true,
            pid_max_per_namespace: true,
            tmpfs_user_xattrs: true,
        }
    }

    fn get(b: &Bounds, res: libc::__rlimit_resource_t) -> Option<u64> {
        b.rlimits.iter().find(|(r, _)| *r == res).map(|(_, v)| *v)
    }

    #[test]
    fn a_user_in_its_own_namespace_gets_nproc_counting_the_init() {
        let b = bounds(&section(), at(true, true), |_| u64::MAX);
        assert_eq!(get(&b, libc::RLIMIT_NPROC), Some(65));
        assert_eq!(b.pid_max, None);
        assert_eq!(get(&b, libc::RLIMIT_DATA), Some(256 << 20));
        assert_eq!(get(&b, libc::RLIMIT_NOFILE), Some(100));
        assert_eq!(
            b.scratch,
            Some(ScratchSize {
                bytes: 8 << 20,
                inodes: 1024,
                holds_layers: true,
            })
        );
    }

    #[test]
    fn root_is_bounded_by_the_pid_namespace_not_nproc() {
        let b = bounds(&section(), at(true, false), |_| u64::MAX);
        assert_eq!(get(&b, libc::RLIMIT_NPROC), None);
        assert_eq!(b.pid_max, Some(64 + RESERVED_PIDS));
        let old = Where {
            pid_max_per_namespace: false,
            ..at(true, false)
        };
        let b = bounds(&section(), old, |_| u64::MAX);
        assert_eq!((get(&b, libc::RLIMIT_NPROC), b.pid_max), (None, None));
        assert!(!applied(&section(), old)[0].bounded);
    }

    #[test]
    fn without_namespaces_processes_and_scratch_are_not_bounded() {
        for own in [true, false] {
            let b = bounds(&section(), at(false, own), |_| u64::MAX);
            assert_eq!((get(&b, libc::RLIMIT_NPROC), b.pid_max), (None, None));
            assert_eq!(b.scratch, None);
            assert_eq!(get(&b, libc::RLIMIT_NOFILE), Some(100));
            let a = applied(&section(), at(false, own));
            assert_eq!(
                a.iter().map(|x| x.bounded).collect::<Vec<_>>(),
                [false, true, true, false]
            );
        }
    }

    #[test]
    fn no_limit_is_above_rootfences_own_and_zero_means_none() {
        let b = bounds(&section(), at(true, true), |_| 50);
        assert_eq!(get(&b, libc::RLIMIT_NOFILE), Some(50));
        assert_eq!(get(&b, libc::RLIMIT_NPROC), Some(50));
        let none = ResourcesSection {
            processes: 0,
            memory_mb: 0,
            open_files: 0,
            scratch_mb: 0,
        };
        assert_eq!(bounds(&none, at(true, true), |_| 50), Bounds::default());
        assert!(applied(&none, at(true, true)).iter().all(|a| !a.bounded));
    }
}
