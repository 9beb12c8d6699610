//! Building the server's filesystem view in the child: the mount
//! operations [`super::translate`] prepared, carried out with raw system
//! calls in the new mount namespace.
//!
//! The view's `tmpfs` becomes `/` (first `pivot_root`), with the host's
//! tree under [`HOST`] while the view is built. Every bind source is opened
//! without following any symlink, checked against the object surveyed in
//! the parent, cloned (`open_tree`) and moved onto a target opened the same
//! way (`move_mount`), so nothing is resolved by path twice. The server's
//! sized scratch filesystem is made at [`SCRATCH_STAGING`] first (the
//! private layers' upper directories live in it) and bound at the scratch
//! path in order, then moved into the host's tree. Then the host's tree is
//! detached (one detach for both, each waiting for an RCU grace period),
//! the whole view made read-only, `nosuid` and `nodev` in one call, and
//! the mounts that differ get their own attributes on their own
//! descriptors, outer mounts first.

use std::cell::Cell;
use std::ffi::{CStr, CString};
use std::os::fd::RawFd;

use super::inotify::{InotifySetup, take_proc, write_limits};
use super::protocol::{Step, errno, fail};

/// Where the host's tree is while the view is built (removed before the
/// server runs).
pub const HOST: &str = "/.rootfence-host";

/// Where the server's scratch filesystem is made while the view is built
/// (bound at the scratch path, then moved into the host's tree and
/// detached with it).
pub const SCRATCH_STAGING: &str = "/.rootfence-scratch";

/// `MOUNT_ATTR_RDONLY`.
pub const MOUNT_ATTR_RDONLY: u64 = 0x1;
/// No set-user-ID.
pub const MOUNT_ATTR_NOSUID: u64 = 0x2;
/// No device files.
pub const MOUNT_ATTR_NODEV: u64 = 0x4;
/// No execution.
pub const MOUNT_ATTR_NOEXEC: u64 = 0x8;

/// The attributes the whole view gets once built.
pub const VIEW_ATTRS: u64 = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV;

/// One operation of the filesystem view, ready for the child: targets are
/// absolute paths of the view, sources absolute paths below [`HOST`] (or
/// [`SCRATCH_STAGING`]).
#[derive(Debug)]
pub enum ViewOp {
    /// `mkdir`.
    Dir(CString),
    /// An empty file (mount point).
    File(CString),
    /// A copy of a small host file.
    Copy {
        /// Source, below [`HOST`].
        src: CString,
        /// Target.
        dst: CString,
    },
    /// `symlink(text, at)`.
    Symlink {
        /// Where.
        at: CString,
        /// Its text.
        text: CString,
    },
    /// A recursive bind mount, made from descriptors: the source opened
    /// without following any symlink and checked, cloned (`open_tree`),
    /// and moved onto the target opened the same way (`move_mount`).
    Bind {
        /// Source, below [`HOST`] (a canonical path: no symlink in it), or
        /// [`SCRATCH_STAGING`].
        src: CString,
        /// Target (canonical too).
        dst: CString,
        /// `MOUNT_ATTR_*` it must have (recursively).
        attrs: u64,
        /// Whether they are set on their own once the whole view has its
        /// default attributes ([`VIEW_ATTRS`]).
        fixup: bool,
        /// The (device, inode) the source must have.
        identity: Option<(u64, u64)>,
        /// The target is the same object as the source (it lies inside a
        /// mounted grant): checked too.
        on_itself: bool,
    },
    /// An overlay mount; `data` holds the lower, upper and work layers,
    /// the lower one as `/proc/self/fd/<slot>` of the host's `/proc`.
    Overlay {
        /// Target.
        dst: CString,
        /// The mount data.
        data: CString,
        /// The lower layer, below [`HOST`]: opened without following
        /// symlinks, checked, and put at descriptor `slot`.
        lower: CString,
        /// The (device, inode) the lower layer must have.
        identity: Option<(u64, u64)>,
        /// The descriptor number `data` names.
        slot: RawFd,
    },
    /// The server's scratch filesystem: a `tmpfs` of a bounded size at
    /// [`SCRATCH_STAGING`] (bound at the scratch path by a later
    /// [`ViewOp::Bind`]), with the private layers' directories made in it.
    ScratchFs {
        /// The mount options (`size=...,nr_inodes=...,mode=0700`).
        opts: CString,
        /// Directories to make in it, parents first (absolute, below
        /// [`SCRATCH_STAGING`]).
        dirs: Vec<CString>,
    },
    /// A fresh procfs.
    Proc {
        /// Target.
        dst: CString,
    },
    /// An empty read-only tmpfs over a directory.
    Mask {
        /// Target.
        dst: CString,
    },
    /// An empty writable tmpfs of the server's own (its private home
    /// directory): `nosuid`, `nodev`, `noexec`.
    Tmpfs {
        /// Target.
        dst: CString,
        /// Mount options (`mode=0700,size=...`).
        opts: CString,
    },
}

/// The view as the child builds it.
#[derive(Debug)]
pub struct ViewSetup {
    /// Where the view's base `tmpfs` is mounted before the first
    /// `pivot_root` (an existing directory).
    pub base: CString,
    /// The operations building the view.
    pub ops: Vec<ViewOp>,
    /// The working directory to enter in the view (else `/`).
    pub cwd: Option<CString>,
    /// Set `vm.memfd_noexec = 2` for the PID namespace.
    pub memfd_noexec: bool,
    /// The PID namespace's `kernel.pid_max` (`[resources] processes`), as
    /// the text written to it.
    pub pid_max: Option<CString>,
    /// The server's own inotify limits (see [`super::inotify`]).
    pub inotify: Option<InotifySetup>,
    /// One slot per operation: the descriptor of each bind mount's tree,
    /// kept until its attributes are set (so they are set on that very
    /// mount, not on whatever a path names by then). Filled in the child.
    pub tree_fds: Vec<Cell<RawFd>>,
}

/// `struct mount_attr` (`MOUNT_ATTR_SIZE_VER0`).
#[repr(C)]
pub(super) struct MountAttr {
    pub attr_set: u64,
    pub attr_clr: u64,
    pub propagation: u64,
    pub userns_fd: u64,
}

/// `open_tree` and `move_mount` flags, and `openat2`'s `struct open_how`
/// with its `resolve` flags.
const OPEN_TREE_CLONE: u32 = 1;
const AT_RECURSIVE: u32 = 0x8000;
const AT_EMPTY_PATH: u32 = 0x1000;
const MOVE_MOUNT_F_EMPTY_PATH: u32 = 0x04;
const MOVE_MOUNT_T_EMPTY_PATH: u32 = 0x40;
const RESOLVE_NO_MAGICLINKS: u64 = 0x02;
const RESOLVE_NO_SYMLINKS: u64 = 0x04;

#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// `"/proc/sys/vm/memfd_noexec"` of the view being built.
const MEMFD_NOEXEC: &CStr = c"/proc/sys/vm/memfd_noexec";
/// `"/proc/sys/kernel/pid_max"` of the view being built.
const PID_MAX: &CStr = c"/proc/sys/kernel/pid_max";

/// Build the filesystem view and enter it.
///
/// # Safety
///
/// Call only in the child, in its new mount namespace, as the first user
/// of `view`. Async-signal-safe: raw system calls on C strings `view`
/// owns; a failure is reported on `err` and the child exits.
pub(super) unsafe fn build_view(err: RawFd, view: &ViewSetup) {
    // SAFETY (whole body): raw system calls on C strings owned by `view`,
    // and the functions below under the same contract.
    unsafe {
        enter_base(err, &view.base);
        for (i, op) in view.ops.iter().enumerate() {
            run_op(err, i as u32, op, view.tree_fds.get(i));
        }
        // The namespace's settings are written through /proc/sys before it
        // is masked below.
        if view.memfd_noexec {
            write_sysctl(err, MEMFD_NOEXEC, c"2", Step::MemfdNoexec);
        }
        if let Some(n) = &view.pid_max {
            write_sysctl(err, PID_MAX, n, Step::PidMax);
        }
        if let Some(i) = &view.inotify {
            match i.new_user_namespace {
                Some(_) => take_proc(err, i),
                None => write_limits(err, i),
            }
        }
        for (i, op) in view.ops.iter().enumerate() {
            if let ViewOp::Mask { dst } = op
                && libc::mount(
                    c"tmpfs".as_ptr(),
                    dst.as_ptr(),
                    c"tmpfs".as_ptr(),
                    libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    c"size=4k,mode=0555".as_ptr().cast(),
                ) < 0
            {
                fail(err, Step::ViewOp, i as u32, errno());
            }
        }
        leave_host(err, view);
        set_attributes(err, view);
        if let Some(cwd) = &view.cwd
            && libc::chdir(cwd.as_ptr()) < 0
        {
            libc::chdir(c"/".as_ptr());
        }
    }
}

/// Make the mounts private, mount the view's `tmpfs` on `base` and make it
/// `/`, with the host's tree at [`HOST`].
unsafe fn enter_base(err: RawFd, base: &CStr) {
    // SAFETY (whole body): raw system calls on static and owned C strings.
    unsafe {
        if libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ) < 0
        {
            fail(err, Step::MountPrivate, 0, errno());
        }
        let base_ok = libc::mount(
            c"tmpfs".as_ptr(),
            base.as_ptr(),
            c"tmpfs".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            c"mode=0755".as_ptr().cast(),
        ) == 0
            && libc::chdir(base.as_ptr()) == 0
            && libc::mkdir(c".rootfence-host".as_ptr(), 0o700) == 0
            && libc::syscall(
                libc::SYS_pivot_root,
                c".".as_ptr(),
                c".rootfence-host".as_ptr(),
            ) == 0
            && libc::chdir(c"/".as_ptr()) == 0;
        if !base_ok {
            fail(err, Step::ViewBase, 0, errno());
        }
    }
}

/// Carry out operation `i`; a bind mount's tree descriptor goes to `slot`.
unsafe fn run_op(err: RawFd, i: u32, op: &ViewOp, slot: Option<&Cell<RawFd>>) {
    // SAFETY (whole body): raw system calls on C strings owned by `op`.
    unsafe {
        let ok = match op {
            // What is made in the view is made beneath a parent opened
            // without following any symlink: in the server's store (its
            // home) a link the server planted is never followed.
            ViewOp::Dir(p) => at_parent(p, |d, name| {
                libc::mkdirat(d, name, 0o755) == 0 || errno() == libc::EEXIST
            }),
            ViewOp::File(p) => at_parent(p, |d, name| {
                libc::mknodat(d, name, libc::S_IFREG | 0o644, 0) == 0 || errno() == libc::EEXIST
            }),
            ViewOp::Copy { src, dst } => copy_file(src, dst),
            ViewOp::Symlink { at, text } => at_parent(at, |d, name| {
                if libc::symlinkat(text.as_ptr(), d, name) == 0 {
                    return true;
                }
                // One made at an earlier launch (the store is kept), or by
                // a launch of the same server at the same time: replaced
                // whole (a new link renamed over it); anything else there
                // stays, and the launch fails.
                let mut st: libc::stat = std::mem::zeroed();
                if errno() != libc::EEXIST
                    || libc::fstatat(d, name, &mut st, libc::AT_SYMLINK_NOFOLLOW) != 0
                    || st.st_mode & libc::S_IFMT != libc::S_IFLNK
                {
                    return false;
                }
                let mut tmp = [0u8; TEMP_NAME];
                let t = temp_name(&mut tmp);
                if libc::symlinkat(text.as_ptr(), d, t) != 0 {
                    return false;
                }
                let ok = libc::renameat(d, t, d, name) == 0;
                if !ok {
                    libc::unlinkat(d, t, 0);
                }
                ok
            }),
            ViewOp::Bind {
                src,
                dst,
                identity,
                on_itself,
                ..
            } => bind(err, i, src, dst, *identity, *on_itself, slot),
            ViewOp::Overlay {
                dst,
                data,
                lower,
                identity,
                slot,
            } => overlay(err, i, dst, data, lower, *identity, *slot),
            ViewOp::ScratchFs { opts, dirs } => scratch_fs(opts, dirs),
            // Masks go on once the namespace's settings are written.
            ViewOp::Mask { .. } => true,
            ViewOp::Tmpfs { dst, opts } => {
                libc::mount(
                    c"tmpfs".as_ptr(),
                    dst.as_ptr(),
                    c"tmpfs".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    opts.as_ptr().cast(),
                ) == 0
            }
            // Only the processes the reader could trace are visible: the
            // server sees its own, not the init.
            ViewOp::Proc { dst } => {
                libc::mount(
                    c"proc".as_ptr(),
                    dst.as_ptr(),
                    c"proc".as_ptr(),
                    libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                    c"hidepid=ptraceable".as_ptr().cast(),
                ) == 0
            }
        };
        if !ok {
            fail(err, Step::ViewOp, i, errno());
        }
    }
}

/// Copy the host's small file `src` to `dst` in the view.
unsafe fn copy_file(src: &CStr, dst: &CStr) -> bool {
    // SAFETY (whole body): raw system calls on the C strings and our own
    // descriptors.
    unsafe {
        let from = open_beneath(src, libc::O_RDONLY);
        if from < 0 {
            return false;
        }
        // Written under a new name, then renamed over whatever is there (a
        // file of an earlier launch in the store, or of a launch of the
        // same server at the same time): never opened through a link or a
        // FIFO, never half written.
        let ok = at_parent(dst, |d, name| {
            let mut tmp = [0u8; TEMP_NAME];
            let t = temp_name(&mut tmp);
            let to = libc::openat(
                d,
                t,
                libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                0o644,
            );
            if to < 0 {
                return false;
            }
            let mut ok = true;
            loop {
                let n = libc::sendfile(to, from, std::ptr::null_mut(), 1 << 16);
                if n == 0 {
                    break;
                }
                if n < 0 {
                    ok = false;
                    break;
                }
            }
            libc::close(to);
            ok = ok && libc::renameat(d, t, d, name) == 0;
            if !ok {
                libc::unlinkat(d, t, 0);
            }
            ok
        });
        libc::close(from);
        ok
    }
}

/// Length of a temporary name's buffer: `.rootfence-`, 16 hex digits and
/// the terminating zero.
const TEMP_NAME: usize = 11 + 16 + 1;

/// A fresh temporary file name in `buf` (`.rootfence-` and 16 random hex
/// digits), as a C string. Async-signal-safe: `getrandom` into the stack.
fn temp_name(buf: &mut [u8; TEMP_NAME]) -> *const libc::c_char {
    let mut r = [0u8; 8];
    // SAFETY: getrandom writes at most 8 bytes into `r`; a short read
    // leaves zeros, and the name is then made unique by the pid below.
    let n = unsafe { libc::getrandom(r.as_mut_ptr().cast(), r.len(), libc::GRND_NONBLOCK) };
    if n != 8 {
        // SAFETY: getpid cannot fail.
        let pid = unsafe { libc::getpid() } as u32;
        r[..4].copy_from_slice(&pid.to_ne_bytes());
    }
    buf[..11].copy_from_slice(b".rootfence-");
    const HEX: &[u8; 16] = b"0123456789abcdef";
    for (i, b) in r.iter().enumerate() {
        buf[11 + 2 * i] = HEX[usize::from(b >> 4)];
        buf[12 + 2 * i] = HEX[usize::from(b & 0xf)];
    }
    buf[TEMP_NAME - 1] = 0;
    buf.as_ptr().cast()
}

/// A recursive bind of `src` at `dst`, from descriptors (see
/// [`ViewOp::Bind`]); the tree's descriptor is kept in `slot`.
unsafe fn bind(
    err: RawFd,
    i: u32,
    src: &CStr,
    dst: &CStr,
    identity: Option<(u64, u64)>,
    on_itself: bool,
    slot: Option<&Cell<RawFd>>,
) -> bool {
    // SAFETY (whole body): raw system calls on the C strings and our own
    // descriptors.
    unsafe {
        let from = open_beneath(src, libc::O_PATH);
        if from < 0 {
            return false;
        }
        if !same_object(from, identity) {
            fail(err, Step::RootChanged, i, libc::ESTALE);
        }
        let tree = libc::syscall(
            libc::SYS_open_tree,
            from,
            c"".as_ptr(),
            OPEN_TREE_CLONE | libc::O_CLOEXEC as u32 | AT_RECURSIVE | AT_EMPTY_PATH,
        ) as libc::c_int;
        if tree < 0 {
            return false;
        }
        libc::close(from);
        let to = open_beneath(dst, libc::O_PATH);
        if to < 0 {
            return false;
        }
        if on_itself && !same_object(to, identity) {
            fail(err, Step::RootChanged, i, libc::ESTALE);
        }
        if libc::syscall(
            libc::SYS_move_mount,
            tree,
            c"".as_ptr(),
            to,
            c"".as_ptr(),
            MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH,
        ) < 0
        {
            return false;
        }
        libc::close(to);
        match slot {
            Some(s) => s.set(tree),
            None => {
                libc::close(tree);
            }
        }
        true
    }
}

/// An overlay at `dst` whose lower layer is `lower`, by descriptor (see
/// [`ViewOp::Overlay`]).
unsafe fn overlay(
    err: RawFd,
    i: u32,
    dst: &CStr,
    data: &CStr,
    lower: &CStr,
    identity: Option<(u64, u64)>,
    slot: RawFd,
) -> bool {
    // SAFETY (whole body): raw system calls on the C strings and our own
    // descriptors.
    unsafe {
        let from = open_beneath(lower, libc::O_PATH | libc::O_DIRECTORY);
        if from < 0 {
            return false;
        }
        if !same_object(from, identity) {
            fail(err, Step::RootChanged, i, libc::ESTALE);
        }
        if libc::dup2(from, slot) < 0 {
            return false;
        }
        libc::close(from);
        let ok = libc::mount(
            c"overlay".as_ptr(),
            dst.as_ptr(),
            c"overlay".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV,
            data.as_ptr().cast(),
        ) == 0;
        let e = errno();
        libc::close(slot);
        *libc::__errno_location() = e;
        ok
    }
}

/// The sized scratch `tmpfs` at [`SCRATCH_STAGING`], with `dirs` in it.
unsafe fn scratch_fs(opts: &CStr, dirs: &[CString]) -> bool {
    // SAFETY (whole body): raw system calls on the C strings.
    unsafe {
        let at = c"/.rootfence-scratch";
        if libc::mkdir(at.as_ptr(), 0o700) < 0
            || libc::mount(
                c"tmpfs".as_ptr(),
                at.as_ptr(),
                c"tmpfs".as_ptr(),
                libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
                opts.as_ptr().cast(),
            ) < 0
        {
            return false;
        }
        dirs.iter()
            .all(|d| libc::mkdir(d.as_ptr(), 0o700) == 0 || errno() == libc::EEXIST)
    }
}

/// Write `value` to the sysctl file `path` of the view's fresh `/proc`.
unsafe fn write_sysctl(err: RawFd, path: &CStr, value: &CStr, step: Step) {
    // SAFETY (whole body): raw system calls on the C strings and our own
    // descriptor.
    unsafe {
        let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
        let len = value.to_bytes().len();
        if fd < 0 || libc::write(fd, value.as_ptr().cast(), len) != len as isize {
            fail(err, step, 0, errno());
        }
        libc::close(fd);
    }
}

/// Detach the scratch staging and the host's tree, and make the whole view
/// read-only, `nosuid` and `nodev`.
///
/// The staging mount is moved into the host's tree first (onto its
/// `/proc`), so that the one detach of the host's tree takes it too: each
/// detach waits for an RCU grace period, a good part of a millisecond on
/// a busy machine. Where it cannot be moved it is detached on its own.
unsafe fn leave_host(err: RawFd, view: &ViewSetup) {
    // SAFETY (whole body): raw system calls on static C strings.
    unsafe {
        if view
            .ops
            .iter()
            .any(|o| matches!(o, ViewOp::ScratchFs { .. }))
        {
            let at = c"/.rootfence-scratch";
            let gone = park_in_host(at) || libc::umount2(at.as_ptr(), libc::MNT_DETACH) == 0;
            if !gone || libc::rmdir(at.as_ptr()) < 0 {
                fail(err, Step::ViewEnter, 1, errno());
            }
        }
        let host = c"/.rootfence-host";
        let detached = libc::umount2(host.as_ptr(), libc::MNT_DETACH) == 0
            && libc::rmdir(host.as_ptr()) == 0
            && mount_setattr(Target::Path(c"/"), VIEW_ATTRS, 0) == 0;
        if !detached {
            fail(err, Step::ViewEnter, 0, errno());
        }
    }
}

/// Move the mount at `at` (a mount's root) onto the host tree's `/proc`,
/// both opened following no symlink ([`open_beneath`]); false when either
/// cannot be opened or the kernel refuses the move (nothing moved).
///
/// # Safety
///
/// In the child, while the host's tree is at [`HOST`]. Async-signal-safe.
unsafe fn park_in_host(at: &CStr) -> bool {
    // SAFETY (whole body): raw system calls on the C strings and our own
    // descriptors.
    unsafe {
        let from = open_beneath(at, libc::O_PATH | libc::O_DIRECTORY);
        if from < 0 {
            return false;
        }
        let to = open_beneath(c"/.rootfence-host/proc", libc::O_PATH | libc::O_DIRECTORY);
        let moved = to >= 0
            && libc::syscall(
                libc::SYS_move_mount,
                from,
                c"".as_ptr(),
                to,
                c"".as_ptr(),
                MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH,
            ) == 0;
        libc::close(from);
        if to >= 0 {
            libc::close(to);
        }
        moved
    }
}

/// Give the mounts whose attributes differ from [`VIEW_ATTRS`] their own,
/// outer mounts first, and close the trees' descriptors.
unsafe fn set_attributes(err: RawFd, view: &ViewSetup) {
    // SAFETY (whole body): mount_setattr on our own descriptors and C
    // strings owned by `view`.
    unsafe {
        for (i, op) in view.ops.iter().enumerate() {
            let tree = view.tree_fds.get(i).map_or(-1, Cell::get);
            let (at, set, clr) = match op {
                ViewOp::Bind {
                    attrs, fixup: true, ..
                } => {
                    let clr = VIEW_ATTRS & !attrs;
                    (Target::Fd(tree), *attrs, clr | (MOUNT_ATTR_NOEXEC & !attrs))
                }
                // A private layer is written and run from (npx and uvx run
                // what a cache holds), also inside the noexec private home.
                ViewOp::Overlay { dst, .. } => (
                    Target::Path(dst),
                    MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                    MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOEXEC,
                ),
                ViewOp::Tmpfs { dst, .. } => (
                    Target::Path(dst),
                    MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
                    MOUNT_ATTR_RDONLY,
                ),
                _ => continue,
            };
            // A mount the host made noexec (and, in a user namespace,
            // locked so) stays noexec.
            if mount_setattr(at, set, clr) < 0
                && !(errno() == libc::EPERM
                    && mount_setattr(at, set, clr & !MOUNT_ATTR_NOEXEC) == 0)
            {
                fail(err, Step::ViewOp, i as u32, errno());
            }
        }
        for t in &view.tree_fds {
            if t.get() >= 0 {
                libc::close(t.get());
            }
        }
    }
}

/// What `mount_setattr` acts on.
#[derive(Clone, Copy)]
enum Target<'a> {
    /// A path (no symlink followed at its end).
    Path(&'a CStr),
    /// A mount's descriptor.
    Fd(RawFd),
}

/// `mount_setattr(at, AT_RECURSIVE)` setting `set` and clearing `clr`.
unsafe fn mount_setattr(at: Target<'_>, set: u64, clr: u64) -> libc::c_long {
    let a = MountAttr {
        attr_set: set,
        attr_clr: clr,
        propagation: 0,
        userns_fd: 0,
    };
    let (dfd, path, flags) = match at {
        Target::Path(p) => (libc::AT_FDCWD, p, libc::AT_SYMLINK_NOFOLLOW),
        Target::Fd(fd) => (fd, c"", libc::AT_EMPTY_PATH),
    };
    // SAFETY: mount_setattr reads the struct above and the C string.
    unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            dfd,
            path.as_ptr(),
            libc::AT_RECURSIVE | flags,
            &a as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    }
}

/// Open `path` (absolute) with `flags`, following no symlink on the way:
/// the view's paths are canonical, so a symlink met is one put there
/// since they were surveyed (`ELOOP`). A descriptor, or -1.
unsafe fn open_beneath(path: &CStr, flags: libc::c_int) -> libc::c_int {
    let how = OpenHow {
        flags: (flags | libc::O_CLOEXEC | libc::O_NOFOLLOW) as u64,
        mode: 0,
        resolve: RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    };
    // SAFETY: openat2 reads the struct and the C string.
    unsafe {
        libc::syscall(
            libc::SYS_openat2,
            libc::AT_FDCWD,
            path.as_ptr(),
            &how as *const OpenHow,
            std::mem::size_of::<OpenHow>(),
        ) as libc::c_int
    }
}

/// `f(parent, name)` with `path`'s parent directory opened following no
/// symlink ([`open_beneath`]) and its last component; `false` when the
/// parent cannot be opened. Async-signal-safe: the parent's path is
/// copied to the stack.
unsafe fn at_parent(path: &CStr, f: impl FnOnce(libc::c_int, *const libc::c_char) -> bool) -> bool {
    // SAFETY: at_parent_fd's contract is this function's.
    unsafe { at_parent_fd(path, |d, name| if f(d, name) { 0 } else { -1 }) >= 0 }
}

/// [`at_parent`] for a call returning a descriptor or -1.
unsafe fn at_parent_fd(
    path: &CStr,
    f: impl FnOnce(libc::c_int, *const libc::c_char) -> libc::c_int,
) -> libc::c_int {
    let bytes = path.to_bytes();
    let mut buf = [0u8; 4096];
    let Some(slash) = bytes.iter().rposition(|&b| b == b'/') else {
        return -1;
    };
    if bytes.len() >= buf.len() || slash + 1 == bytes.len() {
        return -1;
    }
    // The parent ("/" for a name at the top).
    let len = slash.max(1);
    buf[..len].copy_from_slice(&bytes[..len]);
    let Ok(parent) = CStr::from_bytes_with_nul(&buf[..=len]) else {
        return -1;
    };
    // SAFETY: raw system calls on C strings owned here or by the caller;
    // `name` points inside `path`, which outlives the call.
    unsafe {
        let dir = open_beneath(parent, libc::O_PATH | libc::O_DIRECTORY);
        if dir < 0 {
            return -1;
        }
        let r = f(dir, path.as_ptr().add(slash + 1));
        let e = errno();
        libc::close(dir);
        *libc::__errno_location() = e;
        r
    }
}

/// Whether `fd` is the object `identity` names (always, without one).
unsafe fn same_object(fd: libc::c_int, identity: Option<(u64, u64)>) -> bool {
    let Some((dev, ino)) = identity else {
        return true;
    };
    // SAFETY: fstat into a zeroed local.
    unsafe {
        let mut st: libc::stat = std::mem::zeroed();
        libc::fstat(fd, &mut st) == 0 && st.st_dev == dev && st.st_ino == ino
    }
}
