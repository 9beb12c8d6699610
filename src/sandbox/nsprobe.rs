//! The namespace probe: whether this process can give a server namespaces
//! of its own here, found by a test launch with the very flags a launch
//! uses (a user namespace unless rootfence is root) and the mounts the view
//! needs: a child in new mount, PID and IPC namespaces makes its mounts
//! private, mounts a `tmpfs`, a fresh `/proc` and an overlay, sets a mount
//! attribute, sets its PID namespace's `kernel.pid_max`, and gives its user
//! namespace its own inotify limits (as root, in a user namespace it makes
//! for that, as a launch makes one for the server).

use std::os::fd::{AsRawFd, RawFd};

use serde::{Deserialize, Serialize};

use super::clone;
use super::ids::{IdMaps, Identity, namespace_flags};
use super::inotify::{self, IdMapLines};
use super::mount::{MOUNT_ATTR_RDONLY, MountAttr};

/// What a test launch found about namespaces on this machine, for this
/// user.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NamespaceSupport {
    /// User (unless root), mount, PID and IPC namespaces, the filesystem
    /// view and a fresh `/proc` all work.
    pub available: bool,
    /// Overlay mounts (private layers for caches) work in them.
    pub overlay: bool,
    /// rootfence runs as the machine's root (it can also set the PID
    /// namespace's `vm.memfd_noexec`).
    pub root: bool,
    /// The server gets a user namespace of its own (rootfence is not root):
    /// `RLIMIT_NPROC` then counts the server's processes only.
    pub own_user_namespace: bool,
    /// The PID namespace's `kernel.pid_max` can be set (Linux 6.14 and
    /// later): it bounds the processes of a server started by root.
    pub pid_max: bool,
    /// The server's user namespace can be given its own inotify limits
    /// (as root, a user namespace can be made for the server).
    pub inotify: bool,
    /// Why not, when not available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

impl NamespaceSupport {
    /// Namespaces refused (`why`), as a launch found.
    pub fn refused(why: String) -> NamespaceSupport {
        let who = Identity::current();
        NamespaceSupport {
            available: false,
            overlay: false,
            root: who == Identity::MachineRoot,
            own_user_namespace: !who.is_root(),
            pid_max: false,
            inotify: false,
            why: Some(why),
        }
    }

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

/// What a test launch found about a network namespace of the server's own
/// (network by domain's first design).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NetnsSupport {
    /// A new network namespace (in a new user namespace unless rootfence
    /// is root) with loopback up and a listener on it works.
    pub available: bool,
    /// Why not, when not available.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

impl NetnsSupport {
    /// Why the server cannot get a network namespace of its own.
    pub fn why_not(&self) -> String {
        self.why
            .clone()
            .unwrap_or_else(|| "network namespaces are not available".into())
    }
}

/// Find out, by a test launch with the flags a launch adds them to (a
/// network namespace, in a user namespace unless rootfence is root),
/// whether the server can get a network namespace of its own: loopback
/// brought up and a listener made in it, as the launch's init does.
pub fn probe_network_namespace() -> NetnsSupport {
    let user = if Identity::current().is_root() {
        0
    } else {
        libc::CLONE_NEWUSER
    };
    let no = |why: String| NetnsSupport {
        available: false,
        why: Some(why),
    };
    let child = || {
        // SAFETY: the fresh child, single-threaded, in its new namespaces:
        // raw system calls on locals, then `_exit`.
        unsafe {
            let code = if super::netns::loopback_up().is_err() {
                1
            } else if super::netns::listen_on(super::netns::PROXY_PORT).is_err() {
                2
            } else {
                0
            };
            libc::_exit(code)
        }
    };
    // SAFETY: `child` runs only raw system calls on locals, then `_exit`;
    // it never returns.
    let started = unsafe { clone::start((user | libc::CLONE_NEWNET) as u64, child) };
    let started = match started {
        Ok(s) => s,
        Err(e) => {
            return no(format!(
                "the kernel refused a new network namespace ({e}){}",
                refusal_hint(e.raw_os_error(), true)
            ));
        }
    };
    let mut status = 0;
    // SAFETY: reaping our own child.
    unsafe {
        libc::waitpid(started.pid, &mut status, 0);
    }
    match libc::WIFEXITED(status).then(|| libc::WEXITSTATUS(status)) {
        Some(0) => NetnsSupport {
            available: true,
            why: None,
        },
        Some(1) => no(
            "loopback cannot be brought up in a new network namespace (a user namespace without capabilities, as under AppArmor's restriction)".into(),
        ),
        Some(2) => no("nothing can listen in a new network namespace".into()),
        _ => no(format!("the probe ended with status {status}")),
    }
}

/// Exit codes of the probe child: below 8, the bits of what does not work
/// although the namespaces do; from 10, the step that failed.
mod exit {
    pub const NO_OVERLAY: i32 = 1;
    pub const NO_PID_MAX: i32 = 2;
    pub const NO_INOTIFY: i32 = 4;
    pub const PARENT: i32 = 10;
    pub const PRIVATE: i32 = 11;
    pub const TMPFS: i32 = 12;
    pub const PROC: i32 = 13;
    pub const SETATTR: i32 = 14;
    /// The same steps refused with `EACCES`: a security module (AppArmor's
    /// `unprivileged_userns` profile) rather than the kernel's own check.
    pub const DENIED: i32 = 20;
}

/// Whether this kernel has a `kernel.pid_max` of each PID namespace's own
/// (Linux 6.14): before, the file is the machine's, and writing it from a
/// PID namespace would change every process's.
pub fn pid_max_per_namespace(release: &str) -> bool {
    kernel_at_least(release, (6, 14))
}

/// Whether the kernel `release` (`uname -r`) is at least `want` (major,
/// minor).
pub fn kernel_at_least(release: &str, want: (u32, u32)) -> bool {
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .filter_map(|p| p.parse::<u32>().ok());
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0)) >= want
}

/// `uname -r`.
pub fn kernel_release() -> String {
    rustix::system::uname()
        .release()
        .to_string_lossy()
        .into_owned()
}

/// Find out, by a test launch, whether this process can give a server its
/// namespaces.
pub fn probe_namespaces() -> NamespaceSupport {
    let who = Identity::current();
    let per_ns_pid_max = pid_max_per_namespace(&kernel_release());
    let no = NamespaceSupport::refused;
    let code = match run_probe(who, per_ns_pid_max) {
        Ok(code) => code,
        Err(why) => return no(why.to_string()),
    };
    let failed = |what: &str| {
        no(format!(
            "in new namespaces, {what} failed{}",
            refusal_hint((code >= exit::DENIED).then_some(libc::EACCES), false)
        ))
    };
    match code {
        0..8 => NamespaceSupport {
            available: true,
            overlay: code & exit::NO_OVERLAY == 0,
            root: who == Identity::MachineRoot,
            own_user_namespace: !who.is_root(),
            pid_max: per_ns_pid_max && code & exit::NO_PID_MAX == 0,
            inotify: code & exit::NO_INOTIFY == 0,
            why: None,
        },
        _ => match code % exit::DENIED {
            exit::PRIVATE => failed("making the mounts private"),
            exit::TMPFS => failed("mounting a tmpfs"),
            exit::PROC => failed("mounting a fresh /proc"),
            exit::SETATTR => failed("mount_setattr"),
            exit::PARENT => no("the probe was not started".into()),
            _ => no(format!("the probe ended with status {code}")),
        },
    }
}

/// Why the probe child could not be started.
#[derive(Debug, thiserror::Error)]
enum ProbeStart {
    /// No pipe to hold the child until its maps are written.
    #[error("cannot create a pipe")]
    Pipe,
    /// `clone3` with the launch's namespace flags failed.
    #[error(
        "the kernel refused new {}mount, PID and IPC namespaces ({source}){hint}",
        if *.root { "" } else { "user, " }
    )]
    Clone {
        /// rootfence runs as root: no user namespace was asked for.
        root: bool,
        /// The kernel's error.
        source: std::io::Error,
        /// Why, as far as can be told, and the way out ([`refusal_hint`]).
        hint: &'static str,
    },
    /// The child's user namespace could not be given its id maps.
    #[error("cannot write the new user namespace's id maps ({source}){hint}")]
    IdMaps {
        /// The error writing them.
        source: std::io::Error,
        /// Why, as far as can be told, and the way out ([`refusal_hint`]).
        hint: &'static str,
    },
}

/// Start the probe child, write its maps, and return its exit code (or why
/// it could not be started).
fn run_probe(who: Identity, pid_max: bool) -> Result<i32, ProbeStart> {
    let (sync_r, sync_w) =
        rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC).map_err(|_| ProbeStart::Pipe)?;
    let sync_r_raw = sync_r.as_raw_fd();
    // As root, the inotify limits go in a user namespace made for them.
    let maps = who.is_root().then(IdMapLines::own);
    // SAFETY: the child runs only `probe_child` (raw system calls on
    // static strings, `maps` and locals), which never returns.
    let started = unsafe {
        clone::start(namespace_flags(who), || {
            probe_child(sync_r_raw, pid_max, maps.as_ref())
        })
    };
    drop(sync_r);
    let started = started.map_err(|source| ProbeStart::Clone {
        root: who.is_root(),
        hint: refusal_hint(source.raw_os_error(), true),
        source,
    })?;
    let maps = if who.is_root() {
        Ok(())
    } else {
        IdMaps::current().write(started.pid)
    };
    if maps.is_ok() {
        let _ = rustix::io::write(&sync_w, &[1u8]);
    }
    drop(sync_w);
    let mut status = 0;
    // SAFETY: reaping our own child.
    unsafe {
        libc::waitpid(started.pid, &mut status, 0);
    }
    if let Err(source) = maps {
        return Err(ProbeStart::IdMaps {
            hint: refusal_hint(source.raw_os_error(), true),
            source,
        });
    }
    Ok(if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        -1
    })
}

/// What to say after the kernel refused the server's namespaces with
/// `errno` (`at_clone`: refused when they were made, else when the view was
/// built in them): why, as far as can be told, and the way out.
pub fn refusal_hint(errno: Option<i32>, at_clone: bool) -> &'static str {
    let restricted =
        std::fs::read_to_string("/proc/sys/kernel/apparmor_restrict_unprivileged_userns")
            .is_ok_and(|v| v.trim() == "1");
    if restricted {
        " (AppArmor restricts unprivileged user namespaces here: kernel.apparmor_restrict_unprivileged_userns = 1; `rootfence doctor --apparmor` prints a profile that lets rootfence have them, and how to load it)"
    } else if errno == Some(libc::EACCES) {
        " (refused with EACCES: a security module such as AppArmor denies it; on Ubuntu 24.04 and later `rootfence doctor --apparmor` prints a profile that lets rootfence have them, and how to load it)"
    } else if at_clone {
        " (a seccomp filter around rootfence, such as a container's default profile, or the kernel's settings, such as user.max_user_namespaces = 0, refuse new namespaces; allow them where you can, e.g. a container run with a seccomp profile that permits them; otherwise rootfence runs its servers on the Landlock + seccomp rung)"
    } else {
        ""
    }
}

/// The probe's child: see [`probe_namespaces`]. With `maps` (rootfence is
/// root), the inotify limits go in a user namespace made for them, as a
/// launch makes one for the server.
fn probe_child(sync_r: RawFd, pid_max: bool, maps: Option<&IdMapLines>) -> ! {
    // SAFETY (whole body): raw system calls on static C strings and
    // locals, in the fresh child.
    unsafe {
        let mut b = 0u8;
        if libc::read(sync_r, (&raw mut b).cast(), 1) != 1 {
            libc::_exit(exit::PARENT);
        }
        let null = std::ptr::null();
        if libc::mount(
            null,
            c"/".as_ptr(),
            null,
            libc::MS_REC | libc::MS_PRIVATE,
            null.cast(),
        ) < 0
        {
            refused(exit::PRIVATE);
        }
        let tmpfs = c"tmpfs";
        if libc::mount(
            tmpfs.as_ptr(),
            c"/tmp".as_ptr(),
            tmpfs.as_ptr(),
            0,
            null.cast(),
        ) < 0
        {
            refused(exit::TMPFS);
        }
        for d in [c"/tmp/p", c"/tmp/l", c"/tmp/u", c"/tmp/w", c"/tmp/m"] {
            libc::mkdir(d.as_ptr(), 0o755);
        }
        let proc = c"proc";
        if libc::mount(
            proc.as_ptr(),
            c"/tmp/p".as_ptr(),
            proc.as_ptr(),
            0,
            null.cast(),
        ) < 0
        {
            refused(exit::PROC);
        }
        let mut missing = 0;
        if !pid_max || !set_pid_max() {
            missing |= exit::NO_PID_MAX;
        }
        // The inotify limits: a user's own namespace's now, through the
        // fresh /proc; as root, a clone of it is kept for the end (the
        // user namespace made then has no right over these mounts).
        let proc_clone = match maps {
            Some(_) => libc::syscall(
                libc::SYS_open_tree,
                libc::AT_FDCWD,
                c"/tmp/p".as_ptr(),
                1u32 | libc::O_CLOEXEC as u32,
            ) as RawFd,
            None => {
                let limit = c"/tmp/p/sys/user/max_inotify_instances";
                if inotify::write_at(libc::AT_FDCWD, limit, c"1") != 0 {
                    missing |= exit::NO_INOTIFY;
                }
                -1
            }
        };
        let a = MountAttr {
            attr_set: MOUNT_ATTR_RDONLY,
            attr_clr: 0,
            propagation: 0,
            userns_fd: 0,
        };
        if libc::syscall(
            libc::SYS_mount_setattr,
            libc::AT_FDCWD,
            c"/tmp/p".as_ptr(),
            0,
            &a as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        ) < 0
        {
            refused(exit::SETATTR);
        }
        let ovl = c"overlay";
        if libc::mount(
            ovl.as_ptr(),
            c"/tmp/m".as_ptr(),
            ovl.as_ptr(),
            0,
            c"lowerdir=/tmp/l,upperdir=/tmp/u,workdir=/tmp/w,userxattr"
                .as_ptr()
                .cast(),
        ) < 0
        {
            missing |= exit::NO_OVERLAY;
        }
        if let Some(maps) = maps
            && (proc_clone < 0
                || inotify::enter(proc_clone, maps, (c"1", c"1")) != inotify::Entered::Done)
        {
            missing |= exit::NO_INOTIFY;
        }
        libc::_exit(missing)
    }
}

/// Exit with `step`'s code, marked when the errno says a security module
/// refused it.
fn refused(step: i32) -> ! {
    // SAFETY: reading errno and exiting.
    unsafe {
        let denied = *libc::__errno_location() == libc::EACCES;
        libc::_exit(step + if denied { exit::DENIED } else { 0 })
    }
}

/// Set the probe's PID namespace's `kernel.pid_max` (its own, on a kernel
/// where [`pid_max_per_namespace`]) to the kernel's smallest value.
///
/// # Safety
///
/// In the probe child only, with the fresh `/proc` at `/tmp/p`.
unsafe fn set_pid_max() -> bool {
    // SAFETY (whole body): raw system calls on a static string and our own
    // descriptor.
    unsafe {
        let fd = libc::open(
            c"/tmp/p/sys/kernel/pid_max".as_ptr(),
            libc::O_WRONLY | libc::O_CLOEXEC,
        );
        if fd < 0 {
            return false;
        }
        let ok = libc::write(fd, c"301".as_ptr().cast(), 3) == 3;
        libc::close(fd);
        ok
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pid_max_is_the_namespaces_own_from_6_14() {
        assert!(pid_max_per_namespace("6.18.44-fc-v657"));
        assert!(pid_max_per_namespace("6.14.0"));
        assert!(pid_max_per_namespace("7.0.1"));
        assert!(!pid_max_per_namespace("6.13.9-arch1"));
        assert!(!pid_max_per_namespace("5.15.0-91-generic"));
        assert!(!pid_max_per_namespace("garbage"));
        assert!(kernel_at_least("5.14.0-1", (5, 14)));
        assert!(!kernel_at_least("5.13.19", (5, 14)));
    }
}
