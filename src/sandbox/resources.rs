//! `[resources]`: what a server may take of the machine, and how each bound
//! is applied where it runs.
//!
//! Where a cgroup can be had ([`super::cgroup`]: cgroup v2 as root or in a
//! subtree delegated to the user, cgroup v1 as root), the server and
//! everything it starts share one:
//!
//! - processes and threads: its `pids.max`, every process and thread of
//!   the server (with namespaces, its init too);
//! - memory: its memory limit, which counts what per-process limits do
//!   not see: shared memory (`MAP_SHARED`), memfds, and the pages of the
//!   scratch `tmpfs` and `/dev/shm`; a process that crosses it is killed
//!   by the kernel's OOM killer, the others go on.
//!
//! Under it, and alone where no cgroup can be had, the kernel's
//! per-process limits and the server's own namespaces are the floor:
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
//!   count), which fails an allocation (`ENOMEM`) rather than killing;
//! - open files: `RLIMIT_NOFILE` of each process;
//! - scratch, `/dev/shm` and private layers: a `tmpfs` of a bounded size
//!   (and number of files) in the server's view, holding its `TMPDIR`, its
//!   `/dev/shm` (POSIX shared memory and semaphores) and (Linux 6.6 and
//!   later, whose `tmpfs` keeps the user extended attributes overlayfs
//!   needs) the private layers' upper directories; without namespaces the
//!   scratch directory is on the host's disk and not bounded, and so is
//!   the server's own `/dev/shm`, a directory beside it where rootfence's
//!   supervisor makes and opens its POSIX shared memory and semaphores
//!   (the host's, shared by every process, is not granted);
//! - inotify: with namespaces, the server's own user namespace (the one
//!   it runs in, or as root one made for it before it starts) gets a
//!   quarter of the user's `max_inotify_instances` and
//!   `max_inotify_watches`: the kernel counts inotify per user and user
//!   namespace, and charges the server's against the user's too, so the
//!   user keeps three quarters whatever the server does. Without
//!   namespaces rootfence's supervisor counts the server's instances and
//!   refuses one past the same quarter ([`super::seccomp::instances`]);
//!   watches are not bounded.
//!
//! [`bounds`] is the pure decision; the parent makes the cgroup
//! ([`super::cgroup`]) and the child applies the rest ([`super::child`],
//! [`super::mount`]).

use serde::Serialize;

use super::cgroup::Controllers;
use super::nsprobe::kernel_at_least;
use crate::policy::ResourcesSection;

/// Where the server runs, as far as the bounds are concerned.
#[derive(Debug, Clone, PartialEq, Eq)]
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
    /// The controllers the server's own cgroup gets here (none where no
    /// cgroup can be had).
    pub cgroup: Controllers,
    /// Why a controller cannot be had, when one cannot.
    pub no_cgroup: String,
    /// The user's inotify limits: instances and watches.
    pub user_inotify: (u64, u64),
    /// With namespaces, the server's user namespace can be given its own
    /// inotify limits (its own, or as root one made for it).
    pub inotify_namespace: bool,
}

impl Where {
    /// For a server with or without `namespaces`, started by `who` on a
    /// kernel of this `release` (`uname -r`), with a cgroup of these
    /// `controllers` (or why not), the user's inotify limits.
    pub fn new(
        namespaces: bool,
        who: super::ids::Identity,
        release: &str,
        cgroup: (Controllers, String),
        user_inotify: (u64, u64),
    ) -> Where {
        Where {
            namespaces,
            own_user_namespace: !who.is_root(),
            nproc_per_namespace: kernel_at_least(release, (5, 14)),
            pid_max_per_namespace: super::nsprobe::pid_max_per_namespace(release),
            tmpfs_user_xattrs: kernel_at_least(release, (6, 6)),
            cgroup: cgroup.0,
            no_cgroup: cgroup.1,
            user_inotify,
            inotify_namespace: true,
        }
    }
}

/// The user's inotify limits (`/proc/sys/user/max_inotify_instances` and
/// `max_inotify_watches`), read once; the kernel's defaults where they
/// cannot be read.
pub fn user_inotify() -> (u64, u64) {
    static ONCE: std::sync::OnceLock<(u64, u64)> = std::sync::OnceLock::new();
    *ONCE.get_or_init(|| {
        let read = |f: &str, default: u64| {
            std::fs::read_to_string(format!("/proc/sys/user/{f}"))
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or(default)
        };
        (
            read("max_inotify_instances", 128),
            read("max_inotify_watches", 8192),
        )
    })
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

/// The share of the user's inotify limits a server gets: one in this many.
pub const INOTIFY_SHARE: u64 = 4;

/// The server's own inotify limits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Inotify {
    /// `max_inotify_instances` of its user namespace.
    pub instances: u64,
    /// `max_inotify_watches` of its user namespace.
    pub watches: u64,
}

/// The bounds a launch applies.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Bounds {
    /// Limits the server gets, soft and hard: (resource, value).
    pub rlimits: Vec<(libc::__rlimit_resource_t, u64)>,
    /// The PID namespace's `kernel.pid_max`.
    pub pid_max: Option<u64>,
    /// The scratch filesystem's size.
    pub scratch: Option<ScratchSize>,
    /// What the server's own cgroup holds.
    pub cgroup: super::cgroup::Limits,
    /// Its user namespace's inotify limits.
    pub inotify: Option<Inotify>,
}

/// The bounds of `r` for a server running `at`, given the hard limits
/// rootfence holds (`hard(resource)`: a server's limit is never above
/// rootfence's, which it could not raise).
pub fn bounds(
    r: &ResourcesSection,
    at: &Where,
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
        } else if !at.own_user_namespace && at.pid_max_per_namespace && !at.cgroup.pids {
            b.pid_max = Some(r.processes + RESERVED_PIDS);
        }
    }
    if r.memory_mb > 0 && at.cgroup.memory {
        b.cgroup.memory = Some(r.memory_mb.saturating_mul(1 << 20));
    }
    if r.processes > 0 && at.cgroup.pids {
        // With namespaces the init is in the cgroup too.
        b.cgroup.pids = Some(r.processes + u64::from(at.namespaces));
    }
    if r.scratch_mb > 0 && at.namespaces {
        b.scratch = Some(ScratchSize {
            bytes: r.scratch_mb.saturating_mul(1 << 20),
            inodes: r.scratch_mb.saturating_mul(INODES_PER_MIB).max(1024),
            holds_layers: at.tmpfs_user_xattrs,
        });
    }
    if at.namespaces && at.inotify_namespace {
        let (instances, watches) = at.user_inotify;
        b.inotify = Some(Inotify {
            instances: (instances / INOTIFY_SHARE).max(1),
            watches: (watches / INOTIFY_SHARE).max(1),
        });
    }
    b
}

/// One bound of `[resources]` as it applies here, for `doctor` and
/// `explain`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Applied {
    /// What is bounded.
    pub what: &'static str,
    /// Whether it is bounded here as the policy says.
    pub bounded: bool,
    /// How, or why not.
    pub how: String,
}

/// How each bound of `r` applies to a server running `at`.
pub fn applied(r: &ResourcesSection, at: &Where) -> Vec<Applied> {
    let b = bounds(r, at, |_| u64::MAX);
    let has = |res| b.rlimits.iter().any(|(x, _)| *x == res);
    let off = |what, key: &str| Applied {
        what,
        bounded: false,
        how: format!("[resources] {key} = 0"),
    };
    let yes = |what, how: String| Applied {
        what,
        bounded: true,
        how,
    };
    let no = |what, how: String| Applied {
        what,
        bounded: false,
        how,
    };
    let processes = if r.processes == 0 {
        off("processes and threads", "processes")
    } else if b.cgroup.pids.is_some() {
        yes(
            "processes and threads",
            format!(
                "{} at once, every process and thread of the server and of what it starts together (its cgroup's pids.max)",
                r.processes
            ),
        )
    } else if has(libc::RLIMIT_NPROC) {
        yes(
            "processes and threads",
            format!(
                "{} at once (RLIMIT_NPROC in the server's own user namespace)",
                r.processes
            ),
        )
    } else if let Some(n) = b.pid_max {
        yes(
            "processes and threads",
            format!(
                "{} to {} at once (the PID namespace's kernel.pid_max = {n}: root is exempt from RLIMIT_NPROC)",
                r.processes,
                n - 1
            ),
        )
    } else {
        no(
            "processes and threads",
            if !at.namespaces {
                "not bounded without namespaces (RLIMIT_NPROC would count every process of the user) and without a cgroup".into()
            } else if at.own_user_namespace {
                "not bounded: this kernel counts RLIMIT_NPROC per user, not per user namespace (needs Linux 5.14), and there is no cgroup".into()
            } else {
                "not bounded: root is exempt from RLIMIT_NPROC, this kernel's kernel.pid_max is the machine's, not the PID namespace's (needs Linux 6.14), and there is no cgroup".into()
            },
        )
    };
    let memory = if r.memory_mb == 0 {
        off("memory", "memory_mb")
    } else if b.cgroup.memory.is_some() {
        yes(
            "memory",
            format!(
                "{m} MiB for the server and what it starts together, shared memory, memfds and tmpfs pages included (its cgroup's memory limit: the process that crosses it is killed), and {m} MiB of data per process (RLIMIT_DATA: an allocation beyond fails)",
                m = r.memory_mb
            ),
        )
    } else {
        no(
            "memory",
            format!(
                "{} MiB of data per process only (RLIMIT_DATA); shared memory (MAP_SHARED, memfds, /dev/shm) and the server's total are not bounded: no cgroup can be had here ({})",
                r.memory_mb, at.no_cgroup
            ),
        )
    };
    let files = if r.open_files == 0 {
        off("open files", "open_files")
    } else {
        yes(
            "open files",
            format!(
                "{} per process (RLIMIT_NOFILE, at most rootfence's own hard limit)",
                r.open_files
            ),
        )
    };
    let scratch = match b.scratch {
        _ if r.scratch_mb == 0 => off("scratch space", "scratch_mb"),
        Some(s) => yes(
            "scratch space",
            format!(
                "{} MiB and {} files for TMPDIR, /dev/shm (POSIX shared memory and semaphores){} (a tmpfs in the view)",
                r.scratch_mb,
                s.inodes,
                if s.holds_layers {
                    " and the private layers together"
                } else {
                    " together; the private layers' writes are on the host's disk, not bounded (tmpfs keeps the extended attributes overlayfs needs from Linux 6.6)"
                }
            ),
        ),
        None => no(
            "scratch space",
            "not bounded without namespaces (TMPDIR is a directory on the host's disk, and so is the server's own /dev/shm, where rootfence makes and opens its POSIX shared memory and semaphores; the host's, shared by every process, is not granted)".into(),
        ),
    };
    let (iu, wu) = at.user_inotify;
    let inotify = match b.inotify {
        Some(i) => yes(
            "inotify",
            format!(
                "{} instances and {} watches (its user namespace's own limits, a quarter of the user's {iu} and {wu}, which the server's count against too)",
                i.instances, i.watches
            ),
        ),
        None if !at.namespaces => yes(
            "inotify",
            format!(
                "{} instances and {} watches, counted by rootfence's supervisor (a quarter of the user's {iu} and {wu}; one more is refused with EMFILE or ENOSPC)",
                (iu / 4).max(1),
                (wu / 4).max(1)
            ),
        ),
        None => no(
            "inotify",
            format!(
                "not bounded: the server cannot get a user namespace of its own here, so its instances and watches count against the user's limits ({iu} and {wu}), all of which it can take"
            ),
        ),
    };
    vec![processes, memory, files, scratch, inotify]
}

/// The row of a server's own store (see [`crate::store`]): kept on the
/// user's disk, bounded by nothing but the disk.
pub fn store_row() -> Applied {
    Applied {
        what: "its own store",
        bounded: false,
        how: "what the server writes under its home is kept on your disk (~/.local/state/rootfence/servers) and not bounded; [runtime] home = \"ephemeral\" makes it a 256 MiB home discarded at exit".into(),
    }
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
            cgroup: Controllers::NONE,
            no_cgroup: "none here".into(),
            user_inotify: (128, 8192),
            inotify_namespace: true,
        }
    }

    fn with_cgroup(w: Where) -> Where {
        Where {
            cgroup: Controllers::BOTH,
            no_cgroup: String::new(),
            ..w
        }
    }

    fn get(b: &Bounds, res: libc::__rlimit_resource_t) -> Option<u64> {
        b.rlimits.iter().find(|(r, _)| *r == res).map(|(_, v)| *v)
    }

    #[test]
    fn a_user_in_its_own_namespace_gets_nproc_counting_the_init() {
        let b = bounds(&section(), &at(true, true), |_| u64::MAX);
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
        assert_eq!(
            b.inotify,
            Some(Inotify {
                instances: 32,
                watches: 2048
            })
        );
    }

    #[test]
    fn root_is_bounded_by_the_pid_namespace_not_nproc() {
        let b = bounds(&section(), &at(true, false), |_| u64::MAX);
        assert_eq!(get(&b, libc::RLIMIT_NPROC), None);
        assert_eq!(b.pid_max, Some(64 + RESERVED_PIDS));
        let old = Where {
            pid_max_per_namespace: false,
            ..at(true, false)
        };
        let b = bounds(&section(), &old, |_| u64::MAX);
        assert_eq!((get(&b, libc::RLIMIT_NPROC), b.pid_max), (None, None));
        assert!(!applied(&section(), &old)[0].bounded);
    }

    #[test]
    fn a_cgroup_bounds_the_total_in_every_mode_and_the_rlimits_stay() {
        for (namespaces, own) in [(true, true), (true, false), (false, true), (false, false)] {
            let w = with_cgroup(at(namespaces, own));
            let b = bounds(&section(), &w, |_| u64::MAX);
            assert_eq!(b.cgroup.memory, Some(256 << 20));
            // The init is in the cgroup with namespaces.
            assert_eq!(b.cgroup.pids, Some(64 + u64::from(namespaces)));
            // The cgroup's pids.max is exact: no pid_max slack over it.
            assert_eq!(b.pid_max, None);
            assert_eq!(get(&b, libc::RLIMIT_DATA), Some(256 << 20));
            let a = applied(&section(), &w);
            assert!(a[0].bounded && a[1].bounded, "{a:?}");
            assert!(a[1].how.contains("shared memory"), "{}", a[1].how);
        }
    }

    #[test]
    fn without_a_cgroup_shared_memory_is_said_open() {
        let a = applied(&section(), &at(true, true));
        assert!(!a[1].bounded);
        assert!(
            a[1].how.contains("MAP_SHARED") && a[1].how.contains("none here"),
            "{}",
            a[1].how
        );
    }

    #[test]
    fn without_namespaces_processes_and_scratch_are_not_bounded_and_inotify_is_counted() {
        for own in [true, false] {
            let b = bounds(&section(), &at(false, own), |_| u64::MAX);
            assert_eq!((get(&b, libc::RLIMIT_NPROC), b.pid_max), (None, None));
            assert_eq!(b.scratch, None);
            assert_eq!(b.inotify, None);
            assert_eq!(get(&b, libc::RLIMIT_NOFILE), Some(100));
            let a = applied(&section(), &at(false, own));
            assert_eq!(
                a.iter().map(|x| x.bounded).collect::<Vec<_>>(),
                [false, false, true, false, true]
            );
            assert!(a[3].how.contains("/dev/shm"), "{}", a[3].how);
            assert!(a[4].how.contains("counted by rootfence's supervisor"), "{}", a[4].how);
        }
    }

    #[test]
    fn no_limit_is_above_rootfences_own_and_zero_means_none() {
        let b = bounds(&section(), &at(true, true), |_| 50);
        assert_eq!(get(&b, libc::RLIMIT_NOFILE), Some(50));
        assert_eq!(get(&b, libc::RLIMIT_NPROC), Some(50));
        let none = ResourcesSection {
            processes: 0,
            memory_mb: 0,
            open_files: 0,
            scratch_mb: 0,
        };
        let w = Where {
            inotify_namespace: false,
            ..with_cgroup(at(true, true))
        };
        assert_eq!(bounds(&none, &w, |_| 50), Bounds::default());
        assert!(applied(&none, &w).iter().all(|a| !a.bounded));
    }
}
