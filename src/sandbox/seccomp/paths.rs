//! The calls that name a path, and which of their arguments say what: the
//! calls the filter hands to the supervisor while it observes (see
//! [`FilterPolicy::observe`](super::FilterPolicy::observe)), and where
//! the supervisor finds their path.
//!
//! `openat2` is not here: the filter refuses it (its flags are in memory
//! it cannot read) and libraries fall back to `openat`. Calls naming two
//! paths (`rename`, `link`, `symlink`) are not observed.

/// What a call does with the path it names: the access the sandbox
/// decides on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathOp {
    /// Looks at it without opening it (`stat`, `access`, `readlink`,
    /// `chdir`): only the view can refuse that (Landlock does not rule on
    /// metadata).
    Look,
    /// Opens it, reading or writing as the flags in argument `flags` say
    /// (`None`: `creat`, always a write that may create).
    Open {
        /// The argument holding the open flags.
        flags: Option<u8>,
    },
    /// Creates or removes an entry in its directory (`mkdir`, `unlink`,
    /// `rmdir`).
    Change,
    /// Runs it (`execve`).
    Exec,
}

/// Where a call's path is, and what it does with it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathCall {
    /// The call's name.
    pub name: &'static str,
    /// What it does with the path.
    pub op: PathOp,
    /// The argument naming the directory a relative path starts from
    /// (`None`: the caller's working directory).
    pub dirfd: Option<u8>,
    /// The argument pointing at the path.
    pub path: u8,
    /// Whether a symbolic link as the last component is looked at rather
    /// than followed (`lstat`, `readlink`, `unlink`, `mkdir`).
    pub nofollow: bool,
}

const fn call(name: &'static str, op: PathOp, dirfd: Option<u8>, path: u8) -> PathCall {
    PathCall {
        name,
        op,
        dirfd,
        path,
        nofollow: false,
    }
}

const fn nofollow(c: PathCall) -> PathCall {
    PathCall {
        nofollow: true,
        ..c
    }
}

/// The path call `nr`, if it is one.
pub fn of(nr: i64) -> Option<PathCall> {
    use PathOp::{Change, Exec, Look, Open};
    let c = match nr {
        libc::SYS_openat => call("openat", Open { flags: Some(2) }, Some(0), 1),
        libc::SYS_newfstatat => call("newfstatat", Look, Some(0), 1),
        libc::SYS_statx => call("statx", Look, Some(0), 1),
        libc::SYS_faccessat => call("faccessat", Look, Some(0), 1),
        libc::SYS_faccessat2 => call("faccessat2", Look, Some(0), 1),
        libc::SYS_readlinkat => nofollow(call("readlinkat", Look, Some(0), 1)),
        libc::SYS_chdir => call("chdir", Look, None, 0),
        libc::SYS_execve => call("execve", Exec, None, 0),
        libc::SYS_execveat => call("execveat", Exec, Some(0), 1),
        libc::SYS_mkdirat => nofollow(call("mkdirat", Change, Some(0), 1)),
        libc::SYS_unlinkat => nofollow(call("unlinkat", Change, Some(0), 1)),
        _ => return of_arch(nr),
    };
    Some(c)
}

/// x86_64's older names of the calls above.
#[cfg(target_arch = "x86_64")]
fn of_arch(nr: i64) -> Option<PathCall> {
    use PathOp::{Change, Look, Open};
    let c = match nr {
        libc::SYS_open => call("open", Open { flags: Some(1) }, None, 0),
        libc::SYS_creat => call("creat", Open { flags: None }, None, 0),
        libc::SYS_stat => call("stat", Look, None, 0),
        libc::SYS_lstat => nofollow(call("lstat", Look, None, 0)),
        libc::SYS_access => call("access", Look, None, 0),
        libc::SYS_readlink => nofollow(call("readlink", Look, None, 0)),
        libc::SYS_mkdir => nofollow(call("mkdir", Change, None, 0)),
        libc::SYS_unlink => nofollow(call("unlink", Change, None, 0)),
        libc::SYS_rmdir => nofollow(call("rmdir", Change, None, 0)),
        _ => return None,
    };
    Some(c)
}

#[cfg(not(target_arch = "x86_64"))]
fn of_arch(_nr: i64) -> Option<PathCall> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_path_call_is_on_the_allow_list() {
        let table = super::super::entries(&super::super::FilterPolicy {
            udp: false,
            deny_unix: false,
            deny_inet: false,
            listen: super::super::Listen::Refused,
            namespaces: true,
            report: false,
            supervise_connect: false,
            observe: true,
            observe_network: false,
            locks: true,
            shm: false,
        });
        let mut found = 0;
        for e in &table {
            if let Some(c) = of(e.nr) {
                assert_eq!(c.name, e.name, "{}", e.nr);
                found += 1;
            }
        }
        let expected = if cfg!(target_arch = "x86_64") { 20 } else { 11 };
        assert_eq!(found, expected);
        // openat2 is refused, never observed.
        assert_eq!(of(libc::SYS_openat2), None);
    }
}
