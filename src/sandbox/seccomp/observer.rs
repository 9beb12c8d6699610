//! The supervisor's eyes while it observes a server: for one call that
//! names a path ([`super::paths`]), the path read from the caller's
//! memory and resolved against its working directory or directory
//! descriptor, looked up in the server's view and outside the sandbox, and
//! judged ([`crate::sandbox::observed::judge`]); a refusal of a path that
//! exists outside goes to the record. A `connect()` to a TCP port the plan
//! does not grant, and a refused UDP `socket()` (what a name lookup opens
//! first), are recorded too.
//!
//! # Security
//!
//! The call then goes on as the kernel decides
//! (`SECCOMP_USER_NOTIF_FLAG_CONTINUE`): Landlock and the view still rule
//! on it. `CONTINUE` is unsafe as a security decision (the caller's memory
//! may change between the supervisor's read and the kernel's, a TOCTOU
//! race), and none is made here: the supervisor only watches and grants
//! nothing. The race can only make rootfence record a path other than the
//! one the kernel opened, which the server could as well have opened
//! itself: a record is a proposal at most (`rootfence learn`), checked
//! against the deny list and shown to the user with why. Everything read
//! of the caller (its memory, its working directory, its descriptors, its
//! view) is used only if its notification is still pending afterwards
//! (`SECCOMP_IOCTL_NOTIF_ID_VALID`), so that its pid named the caller
//! throughout.

use std::ffi::OsString;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStringExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use rustix::fs::{FileType, Mode, OFlags, ResolveFlags, StatVfsMountFlags};

use super::notif::read_string;
use super::paths::{PathCall, PathOp};
use crate::sandbox::observed::{
    InView, Kind, Need, Observed, Outside, Record, Refusal, Sandbox, Seen as Told, judge,
};

/// Most connections kept (each address once).
const MAX_CONNECTIONS: usize = 64;

/// What the supervisor observes with: what it knows of the sandbox, and
/// the record it fills.
#[derive(Debug, Default)]
pub struct Observer {
    /// The sandbox the server runs in.
    sandbox: Sandbox,
    /// The refusals seen so far.
    record: Mutex<Record>,
    /// Calls naming a path seen so far.
    calls: AtomicU64,
    /// The root of the server's view, opened once: every process of the
    /// sandbox has the same (the filter refuses `chroot`, `pivot_root`,
    /// mounts and new mount namespaces).
    view_root: OnceLock<OwnedFd>,
    /// Where each new refusal goes as it is seen ([`Observer::watch`]).
    feed: Mutex<Option<std::sync::mpsc::Sender<Told>>>,
    /// Connections refused (each address once, at most
    /// [`MAX_CONNECTIONS`]), and whether a UDP socket was.
    net: Mutex<(std::collections::BTreeSet<std::net::SocketAddr>, bool)>,
}

impl Observer {
    /// An observer of a server running in `sandbox`, that has seen nothing
    /// yet.
    pub fn new(sandbox: Sandbox) -> Observer {
        Observer {
            sandbox,
            ..Observer::default()
        }
    }

    /// Each refusal as it is seen, from now on, after those seen so far
    /// (a path again only when it is seen needing more). One watcher: a
    /// second call replaces the first.
    pub fn watch(&self) -> std::sync::mpsc::Receiver<Told> {
        let (tx, rx) = std::sync::mpsc::channel();
        // The records' locks held: no refusal is sent twice or missed.
        if let Ok(record) = self.record.lock()
            && let Ok(net) = self.net.lock()
            && let Ok(mut feed) = self.feed.lock()
        {
            for r in record.refusals() {
                let _ = tx.send(Told::Path(r));
            }
            for a in &net.0 {
                let _ = tx.send(Told::Connect(*a));
            }
            if net.1 {
                let _ = tx.send(Told::Udp);
            }
            *feed = Some(tx);
        }
        rx
    }

    /// Send `seen` to the watcher, if any.
    fn tell(&self, seen: Told) {
        if let Ok(feed) = self.feed.lock()
            && let Some(tx) = feed.as_ref()
        {
            let _ = tx.send(seen);
        }
    }

    /// A UDP `socket()` the filter refused (told where the policy gives
    /// no network at all: with network by domain, names are the proxy's).
    pub fn refused_udp(&self) {
        if self.sandbox.tcp_connect.is_none() {
            return;
        }
        let news = self
            .net
            .lock()
            .is_ok_and(|mut n| !std::mem::replace(&mut n.1, true));
        if news {
            self.tell(Told::Udp);
        }
    }

    /// A `connect()` to `addr` (read from the caller): recorded when its
    /// TCP port is not granted.
    pub fn connecting(&self, addr: std::net::SocketAddr) {
        let Some(ports) = &self.sandbox.tcp_connect else {
            return;
        };
        if ports.contains(&addr.port()) {
            return;
        }
        let news = self
            .net
            .lock()
            .is_ok_and(|mut n| n.0.len() < MAX_CONNECTIONS && n.0.insert(addr));
        if news {
            self.tell(Told::Connect(addr));
        }
    }

    /// What it saw so far.
    pub fn observed(&self) -> Observed {
        let (refusals, dropped) = self
            .record
            .lock()
            .map(|r| (r.refusals(), r.dropped()))
            .unwrap_or_default();
        Observed {
            refusals,
            dropped,
            calls: self.calls.load(Ordering::Relaxed),
        }
    }
}

/// The longest path the kernel takes, its NUL included.
const PATH_MAX: usize = 4096;

/// Observe the path call `call` of notification `n`; see the module's
/// documentation. Never fails: what cannot be read is not recorded.
pub fn note(listener: RawFd, n: &libc::seccomp_notif, call: PathCall, obs: &Observer) {
    obs.calls.fetch_add(1, Ordering::Relaxed);
    let view = match obs.sandbox.view {
        true => match view_root(listener, n, obs) {
            Some(root) => Some(root),
            None => return,
        },
        false => None,
    };
    let Some(seen) = look(n, call, view) else {
        return;
    };
    // Everything read of the caller was the caller's.
    if super::notif::still_pending(listener, n.id).is_err() {
        return;
    }
    let Some(by) = judge(&obs.sandbox, seen.need, &seen.path, seen.in_view) else {
        return;
    };
    let asked = (seen.asked != seen.path).then_some(seen.asked);
    if let Ok(mut r) = obs.record.lock()
        && let Some(news) = r.add(Refusal {
            path: seen.path,
            asked,
            in_dir: seen.in_dir,
            call: call.name,
            need: seen.need,
            by,
            outside: seen.outside,
            count: 1,
        })
        && let Ok(feed) = obs.feed.lock()
        && let Some(tx) = feed.as_ref()
    {
        let _ = tx.send(Told::Path(news.clone()));
    }
}

/// The root of the server's view, opened from the caller of `n` the
/// first time (and kept only if `n` was still pending after: its pid named
/// a process of the sandbox).
fn view_root<'a>(
    listener: RawFd,
    n: &libc::seccomp_notif,
    obs: &'a Observer,
) -> Option<BorrowedFd<'a>> {
    if let Some(fd) = obs.view_root.get() {
        return Some(fd.as_fd());
    }
    let root = rustix::fs::open(
        format!("/proc/{}/root", n.pid),
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    super::notif::still_pending(listener, n.id).ok()?;
    Some(obs.view_root.get_or_init(|| root).as_fd())
}

/// What one path call was after.
struct Seen {
    /// The object the sandbox rules on, canonical outside.
    path: PathBuf,
    /// The path the server named (absolute).
    asked: PathBuf,
    /// `path` is the directory of `asked`, an entry the call creates or
    /// removes.
    in_dir: bool,
    need: Need,
    outside: Outside,
    in_view: Option<InView>,
}

/// Read and look up the path of a call (in the view from its root
/// `view`, when the server has one): `None` when it cannot be read or
/// names nothing that exists outside.
fn look(n: &libc::seccomp_notif, call: PathCall, view: Option<BorrowedFd<'_>>) -> Option<Seen> {
    let args = n.data.args;
    let raw = read_string(n.pid, args[usize::from(call.path)], PATH_MAX)?;
    if raw.is_empty() {
        // AT_EMPTY_PATH: the call is on a descriptor it holds.
        return None;
    }
    let raw = PathBuf::from(OsString::from_vec(raw));
    let asked = if raw.is_absolute() {
        normal(&raw)
    } else {
        let dirfd = call.dirfd.map(|i| args[usize::from(i)] as i32);
        normal(&base(n.pid, dirfd)?.join(&raw))
    };
    // Paths under /proc name the process that looks: not comparable
    // outside.
    if asked.starts_with("/proc") {
        return None;
    }
    // A call that fails outside too, whatever is granted (mkdir of what
    // exists, unlink or rmdir of what does not), was refused nothing: no
    // line would let it through.
    if call.op == PathOp::Change
        && std::fs::symlink_metadata(&asked).is_ok() == call.name.starts_with("mkdir")
    {
        return None;
    }
    let flags = match call.op {
        PathOp::Open { flags: Some(i) } => args[usize::from(i)] as i32,
        PathOp::Open { flags: None } => libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC,
        _ => 0,
    };
    let follow = !call.nofollow && flags & libc::O_NOFOLLOW == 0;
    let creates = call.op == PathOp::Change
        || (matches!(call.op, PathOp::Open { .. })
            && flags & libc::O_CREAT != 0
            && std::fs::symlink_metadata(&asked).is_err());
    let (target, need, follow) = if creates {
        (asked.parent()?.to_path_buf(), Need::Write, true)
    } else {
        (asked.clone(), need_of(call.op, flags), follow)
    };
    let in_view = view.and_then(|root| in_view(root, &target, follow));
    // A look at what is in the view is refused by nothing: no need to
    // look outside (most calls of a runtime's start are such looks).
    if need == Need::Look && matches!(in_view, Some(InView::Present { .. })) {
        return None;
    }
    let (outside, path) = outside(&target, follow)?;
    Some(Seen {
        path,
        asked,
        in_dir: creates,
        need,
        outside,
        in_view,
    })
}

/// What a call that does not create needs of its path.
fn need_of(op: PathOp, flags: i32) -> Need {
    match op {
        PathOp::Look => Need::Look,
        PathOp::Exec => Need::Exec,
        PathOp::Change => Need::Write,
        PathOp::Open { .. } => {
            let tmpfile = flags & libc::O_TMPFILE == libc::O_TMPFILE;
            if flags & libc::O_PATH != 0 {
                Need::Look
            } else if tmpfile
                || flags & libc::O_ACCMODE != libc::O_RDONLY
                || flags & libc::O_TRUNC != 0
            {
                Need::Write
            } else {
                Need::Read
            }
        }
    }
}

/// The directory a relative path of `pid` starts from: its working
/// directory, or the directory descriptor `dirfd`, as it names them.
fn base(pid: u32, dirfd: Option<i32>) -> Option<PathBuf> {
    let link = match dirfd {
        None | Some(libc::AT_FDCWD) => format!("/proc/{pid}/cwd"),
        Some(fd) if fd >= 0 => format!("/proc/{pid}/fd/{fd}"),
        Some(_) => return None,
    };
    let p = std::fs::read_link(link).ok()?;
    p.is_absolute().then_some(p)
}

/// `p` without `.`, `..` and repeated separators (`..` taken as written:
/// a symbolic link before it is not followed).
fn normal(p: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in p.components() {
        match c {
            Component::Normal(s) => out.push(s),
            Component::ParentDir => {
                out.pop();
            }
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// `path` outside the sandbox, as rootfence's user finds it: what it is,
/// and its canonical path (a last symbolic link kept unless `follow`),
/// from one `O_PATH` open (which opens no FIFO nor device).
fn outside(path: &Path, follow: bool) -> Option<(Outside, PathBuf)> {
    let mut flags = OFlags::PATH | OFlags::CLOEXEC;
    if !follow {
        flags |= OFlags::NOFOLLOW;
    }
    let fd = rustix::fs::open(path, flags, Mode::empty()).ok()?;
    let st = rustix::fs::fstat(&fd).ok()?;
    let kind = match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => Kind::File,
        FileType::Directory => Kind::Dir,
        FileType::Symlink => Kind::Symlink,
        _ => Kind::Special,
    };
    let canonical = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()?;
    canonical.is_absolute().then_some((
        Outside {
            kind,
            uid: st.st_uid,
        },
        canonical,
    ))
}

/// `path` in the view whose root is `root`: every symbolic link resolved
/// inside it, as the server's own lookup would.
fn in_view(root: BorrowedFd<'_>, path: &Path, follow: bool) -> Option<InView> {
    let mut flags = OFlags::PATH | OFlags::CLOEXEC;
    if !follow {
        flags |= OFlags::NOFOLLOW;
    }
    let resolve = ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS;
    match rustix::fs::openat2(root, path, flags, Mode::empty(), resolve) {
        Ok(fd) => {
            let st = rustix::fs::fstatvfs(&fd).ok()?;
            Some(InView::Present {
                read_only: st.f_flag.contains(StatVfsMountFlags::RDONLY),
                noexec: st.f_flag.contains(StatVfsMountFlags::NOEXEC),
            })
        }
        Err(rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR) => Some(InView::Missing),
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_made_plain_as_written() {
        assert_eq!(normal(Path::new("/a/./b//c/../d")), Path::new("/a/b/d"));
        assert_eq!(normal(Path::new("/../..")), Path::new("/"));
    }

    #[test]
    fn what_an_open_needs_comes_from_its_flags() {
        let open = PathOp::Open { flags: Some(2) };
        assert_eq!(need_of(open, libc::O_RDONLY), Need::Read);
        assert_eq!(
            need_of(open, libc::O_RDONLY | libc::O_DIRECTORY),
            Need::Read
        );
        assert_eq!(need_of(open, libc::O_PATH), Need::Look);
        assert_eq!(need_of(open, libc::O_WRONLY), Need::Write);
        assert_eq!(need_of(open, libc::O_RDWR), Need::Write);
        assert_eq!(need_of(open, libc::O_RDONLY | libc::O_TRUNC), Need::Write);
        assert_eq!(need_of(open, libc::O_TMPFILE | libc::O_RDWR), Need::Write);
        assert_eq!(need_of(PathOp::Exec, 0), Need::Exec);
        assert_eq!(need_of(PathOp::Look, libc::O_RDWR), Need::Look);
    }
}
