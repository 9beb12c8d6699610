//! The server's view of the filesystem: a private mount namespace that
//! holds only what the plan grants.
//!
//! Landlock decides what the server may *open*; it does not see metadata
//! (`stat`, `chmod`, `chown`, `utimes`, extended attributes, ACLs) nor
//! `inotify`. Where the kernel grants rootfence a user namespace, the server
//! also gets a filesystem of its own: an empty, read-only `tmpfs` as `/`,
//! with each granted path bind-mounted at its canonical path, read-only
//! unless the plan grants writing, `noexec` where the server may write but
//! not execute (and on roots unless `exec_in_roots`), and a fresh `/proc`
//! of its own PID namespace. What is not granted does not exist there: it
//! cannot be read, listed, watched, stat'ed, chmod'ed or touched, and the
//! files of a read-only grant cannot have their metadata changed (the mount
//! is read-only).
//!
//! This module is split like the rest of the sandbox:
//!
//! - [`survey`] (effectful, in the parent): resolves every grant once,
//!   recording the symlinks met on the way, its kind and, for roots, the
//!   identity of the object the root handle holds;
//! - [`plan_view`] (pure): the mount operations, in order;
//! - the child (`super::child`) carries them out with raw system calls.
//!
//! # Layout rules
//!
//! - Every grant is mounted at its canonical path (no symlink in it), so
//!   nesting is plain path nesting. A grant inside another mounted grant
//!   whose effective rights are the same is not mounted again (it is
//!   visible through its ancestor).
//! - Each symlink met while resolving a grant's path is recreated with the
//!   same text where it lives (unless that place is already inside a
//!   mounted grant), so the path as written resolves in the view as it does
//!   outside.
//! - Effective rights of a mount are the union of the rights of every grant
//!   at or above it (as Landlock's rules combine).
//! - Grants under `/proc` are replaced by the fresh `/proc`; `/dev/fd`,
//!   `/dev/stdin`, `/dev/stdout`, `/dev/stderr` are symlinks into it.
//! - With a scratch directory, `/dev/shm` (POSIX shared memory and
//!   semaphores) is the server's own: a directory of its scratch space,
//!   writable, never executable, counted within its size.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

/// The mount attributes of one mounted grant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Attrs {
    /// Mounted read-only.
    pub readonly: bool,
    /// Mounted `noexec` (no `execve`, no executable mapping of its files).
    pub noexec: bool,
    /// Mounted `nodev` (device nodes on it cannot be opened).
    pub nodev: bool,
}

/// The attributes the whole view gets once built: read-only, `nodev`.
pub const DEFAULT_ATTRS: Attrs = Attrs {
    readonly: true,
    noexec: false,
    nodev: true,
};

/// What a granted path is, as the survey found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A directory.
    Dir,
    /// Anything else (a regular file, a device node).
    File,
    /// A regular file of at most [`COPY_MAX`] bytes.
    SmallFile,
}

/// Largest configuration file under `/etc` copied into the view instead of
/// bind-mounted (a mount per small file is most of a launch's mounts).
pub const COPY_MAX: u64 = 64 * 1024;

/// One grant as surveyed in the parent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Surveyed {
    /// The path as the plan wrote it.
    pub path: PathBuf,
    /// The path with every symlink resolved.
    pub canonical: PathBuf,
    /// Directory or file.
    pub kind: Kind,
    /// Write granted.
    pub write: bool,
    /// Execute granted.
    pub exec: bool,
    /// A root (never executable from unless the plan says so).
    pub root: bool,
    /// For roots: (device, inode) of the object the root handle holds. The
    /// mounted object must be that one.
    pub verify: Option<(u64, u64)>,
    /// (device, inode) of the object surveyed (for roots, the handle's):
    /// what the child must find at the path, or it mounts nothing.
    pub identity: Option<(u64, u64)>,
    /// Copy-on-write: the server may write, into a private upper layer.
    pub private_layer: bool,
    /// Mounted (read-only when `readonly`), whatever the rights around it:
    /// a protected control file inside a writable root, or one pinned in
    /// place (see [`crate::plan::Protected`]).
    pub protect: Option<bool>,
    /// Symlinks met while resolving `path`: where each lives (its resolved
    /// parent joined with its name) and its text.
    pub symlinks: Vec<(PathBuf, OsString)>,
}

impl Surveyed {
    /// A directory granted as `write` and `exec` say, reached by no
    /// symlink and verified against nothing: not a root, not protected,
    /// with no private layer.
    fn plain_dir(path: &Path, write: bool, exec: bool) -> Surveyed {
        Surveyed {
            path: path.to_path_buf(),
            canonical: path.to_path_buf(),
            kind: Kind::Dir,
            write,
            exec,
            root: false,
            verify: None,
            identity: None,
            private_layer: false,
            protect: None,
            symlinks: Vec::new(),
        }
    }
}

/// One operation building the view, relative to the new root.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Create a directory (in the view's own `tmpfs`).
    Dir(PathBuf),
    /// Create an empty file (a mount point for a file).
    File(PathBuf),
    /// Copy the host's file (a small read-only configuration file under
    /// `/etc`) into the view: a snapshot taken at launch.
    Copy(PathBuf),
    /// Create a symlink at `at` with this text.
    Symlink {
        /// Where.
        at: PathBuf,
        /// Its text.
        text: OsString,
    },
    /// Bind-mount the host's `path` (recursively) at the same path.
    Bind {
        /// The canonical path.
        path: PathBuf,
        /// Attributes.
        attrs: Attrs,
        /// For roots: the (device, inode) the mounted object must have.
        verify: Option<(u64, u64)>,
        /// The (device, inode) of the object surveyed: the child mounts it
        /// only if it finds that object at the path.
        identity: Option<(u64, u64)>,
        /// Mounted on itself: the target lies inside an already mounted
        /// grant (host content), so it must be the same object too.
        on_itself: bool,
        /// The view is made read-only, `nodev` and `nosuid` as a whole
        /// once built; a mount whose attributes differ from that, or that
        /// lies inside one that does, has them set on its own afterwards
        /// (outer mounts first).
        fixup: bool,
    },
    /// An overlay at `path`: the host's `path` as the read-only lower
    /// layer, the upper layer in the scratch directory.
    Overlay {
        /// The canonical path.
        path: PathBuf,
        /// Index of the private layer (its directories in scratch).
        layer: usize,
        /// The (device, inode) of the lower layer surveyed.
        identity: Option<(u64, u64)>,
    },
    /// An empty writable `tmpfs` of the server's own at this path (its
    /// private home directory): grants below it are mounted into it.
    Tmpfs(PathBuf),
    /// The server's own store bound at `path` (its home directory),
    /// read-write, never executable: grants below it are mounted into it.
    Store {
        /// The home directory, in the view.
        path: PathBuf,
        /// The store's `home/` on the host (canonical).
        store: PathBuf,
        /// Its (device, inode): the child binds it only if it finds that
        /// object there.
        identity: (u64, u64),
    },
    /// Copy the host's file `from` to `to` in the view (a file rootfence
    /// wrote for the server, put in its private home).
    CopyTo {
        /// The host's file.
        from: PathBuf,
        /// Where, in the view.
        to: PathBuf,
    },
    /// The server's own `/dev/shm` at this path: a directory of its
    /// scratch space, bound writable, `noexec`, `nosuid`, `nodev`.
    Shm(PathBuf),
    /// A fresh `/proc` of the server's PID namespace.
    Proc,
    /// An empty read-only directory over a directory of the fresh `/proc`
    /// (`/proc/sys`: the kernel's settings are not the server's business).
    Mask(PathBuf),
}

impl Op {
    /// The path in the view the operation creates or mounts on.
    pub fn target(&self) -> &Path {
        match self {
            Op::Dir(p) | Op::File(p) | Op::Copy(p) | Op::Tmpfs(p) | Op::Shm(p) => p,
            Op::Store { path, .. } => path,
            Op::CopyTo { to, .. } => to,
            Op::Symlink { at, .. } => at,
            Op::Bind { path, .. } | Op::Overlay { path, .. } => path,
            Op::Proc => Path::new("/proc"),
            Op::Mask(p) => p,
        }
    }
}

/// Effective rights of a mount.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Eff {
    write: bool,
    exec: bool,
    root: bool,
    private_layer: bool,
}

impl Eff {
    fn attrs(self, path: &Path) -> Attrs {
        Attrs {
            readonly: !self.write,
            noexec: !self.exec && (self.write || self.root),
            nodev: !path.starts_with("/dev"),
        }
    }
}

/// The server's private home directory in the view.
#[derive(Debug, Clone, Copy)]
pub struct PrivateHome<'a> {
    /// Where (canonical).
    pub path: &'a Path,
    /// Files put in it: the host's file and its name there.
    pub files: &'a [(PathBuf, OsString)],
    /// The server's store bound there (its canonical `home/` and
    /// identity); `None`: an empty `tmpfs`, discarded at exit.
    pub store: Option<(&'a Path, (u64, u64))>,
}

/// The operations that build the view for `grants`, in the order they
/// must run. `scratch` is the server's private scratch directory
/// (read-write, never executable); `home`, when given, is an empty
/// writable directory of the server's own, with the grants below it
/// mounted into it.
///
/// # Security
///
/// Only surveyed grants and the scratch directory are mounted; every mount
/// is read-only unless its effective rights include write, and `noexec`
/// when it is writable or a root without the execute right. Roots carry
/// the identity their handle holds, which the child checks after mounting.
/// The private home never hides host content: it is left out when a grant
/// is at or above it. A grant below it keeps its own rights (the home's
/// write right does not reach into it).
pub fn plan_view(
    grants: &[Surveyed],
    scratch: Option<&Path>,
    home: Option<PrivateHome<'_>>,
) -> Vec<Op> {
    let mut items: Vec<Surveyed> = grants
        .iter()
        .filter(|g| !g.canonical.starts_with("/proc"))
        .cloned()
        .collect();
    if let Some(s) = scratch {
        items.push(Surveyed::plain_dir(s, true, false));
    }
    items.sort_by(|a, b| a.canonical.cmp(&b.canonical));
    let mut home = home.filter(|h| {
        !items
            .iter()
            .any(|g| crate::roots::within(h.path, &g.canonical))
    });
    let mut b = Builder {
        home: home.map(|h| h.path.to_path_buf()),
        scratch: scratch.map(Path::to_path_buf),
        ..Builder::default()
    };
    for group in items.chunk_by(|a, b| a.canonical == b.canonical) {
        // The private home goes before the first grant below it (they
        // sort after it).
        if let Some(h) = home
            && group[0].canonical.as_path() > h.path
        {
            b.mount_home(h);
            home = None;
        }
        b.mount(&Group::of(group));
    }
    if let Some(h) = home {
        b.mount_home(h);
    }
    b.symlinks(grants);
    b.proc_and_dev();
    b.ops
}

/// The grants of one canonical path, combined.
struct Group {
    canonical: PathBuf,
    own: Eff,
    kind: Kind,
    verify: Option<(u64, u64)>,
    identity: Option<(u64, u64)>,
    protect: Option<bool>,
}

impl Group {
    /// Combine `grants` (all of the same canonical path).
    fn of(grants: &[Surveyed]) -> Group {
        let mut g = Group {
            canonical: grants[0].canonical.clone(),
            own: Eff::default(),
            kind: grants[0].kind,
            verify: None,
            identity: None,
            protect: None,
        };
        for s in grants {
            g.own.write |= s.write;
            g.own.exec |= s.exec;
            g.own.root |= s.root;
            g.own.private_layer |= s.private_layer;
            if s.kind == Kind::Dir {
                g.kind = Kind::Dir;
            } else if s.kind == Kind::File {
                g.kind = Kind::File;
            }
            if s.verify.is_some() {
                g.verify = s.verify;
            }
            if g.identity.is_none() {
                g.identity = s.identity;
            }
            if let Some(ro) = s.protect {
                g.protect = Some(g.protect.unwrap_or(false) || ro);
            }
        }
        g
    }
}

/// The view's operations as they are planned.
#[derive(Default)]
struct Builder {
    /// Mounted paths with their effective rights and whether their
    /// attributes are set on their own, outermost first.
    mounted: Vec<(PathBuf, Eff, bool)>,
    ops: Vec<Op>,
    /// Paths made in the view's own `tmpfs`.
    made: BTreeSet<PathBuf>,
    /// Private layers so far.
    layers: usize,
    /// The private home: mounted, nothing of the host's below it.
    home: Option<PathBuf>,
    /// The scratch directory.
    scratch: Option<PathBuf>,
}

impl Builder {
    /// Make `p`'s missing ancestors.
    fn ancestors_of(&mut self, p: &Path) {
        for a in ancestors(p) {
            if self.made.insert(a.clone()) {
                self.ops.push(Op::Dir(a));
            }
        }
    }

    /// Whether `p` lies inside a mounted grant (host content; not the
    /// private home).
    fn in_mounted(&self, p: &Path) -> bool {
        self.mounted
            .iter()
            .any(|(m, _, _)| Some(m) != self.home.as_ref() && crate::roots::within(p, m))
    }

    /// The private home and the files put in it.
    fn mount_home(&mut self, h: PrivateHome<'_>) {
        self.ancestors_of(h.path);
        self.made.insert(h.path.to_path_buf());
        self.ops.push(Op::Dir(h.path.to_path_buf()));
        self.ops.push(match h.store {
            Some((store, identity)) => Op::Store {
                path: h.path.to_path_buf(),
                store: store.to_path_buf(),
                identity,
            },
            None => Op::Tmpfs(h.path.to_path_buf()),
        });
        for (from, name) in h.files {
            self.ops.push(Op::CopyTo {
                from: from.clone(),
                to: h.path.join(name),
            });
        }
        let eff = Eff {
            write: true,
            exec: false,
            root: false,
            private_layer: false,
        };
        self.mounted.push((h.path.to_path_buf(), eff, true));
    }

    /// The operations of one group of grants.
    fn mount(&mut self, g: &Group) {
        let canonical = &g.canonical;
        let parent = self
            .mounted
            .iter()
            .rev()
            .find(|(p, _, _)| crate::roots::within(canonical, p))
            .map(|(p, e, f)| (p.clone(), *e, *f));
        // Below the private home nothing of the host's is there: the grant
        // is mounted as at the top, with its own rights, and its
        // attributes set on its own (the home's differ from the view's).
        let fresh = parent
            .as_ref()
            .is_some_and(|(p, _, _)| self.home.as_ref() == Some(p));
        let own = g.own;
        let mut eff = match parent {
            Some(_) if fresh => own,
            Some((_, pe, _)) => Eff {
                write: pe.write || own.write,
                exec: pe.exec || own.exec,
                root: pe.root || own.root,
                private_layer: own.private_layer,
            },
            None => own,
        };
        if g.protect == Some(true) {
            eff = Eff {
                write: false,
                exec: false,
                root: true,
                private_layer: false,
            };
        }
        let inside = parent.is_some() && !fresh;
        // The scratch directory is always mounted: with a sized scratch
        // filesystem it is not the host's directory, even inside a root.
        let scratch = self.scratch.as_ref() == Some(canonical);
        if let Some((_, pe, _)) = parent
            && !fresh
            && !scratch
            && g.verify.is_none()
            && g.protect.is_none()
            && !own.private_layer
            && pe.write == eff.write
            && pe.exec == eff.exec
            && pe.root == eff.root
        {
            // Visible through its ancestor, with the same attributes.
            return;
        }
        if !inside
            && g.kind == Kind::SmallFile
            && !eff.write
            && !eff.exec
            && g.verify.is_none()
            && g.protect.is_none()
            && canonical.starts_with("/etc")
        {
            self.ancestors_of(canonical);
            self.made.insert(canonical.clone());
            self.ops.push(Op::Copy(canonical.clone()));
            return;
        }
        if !inside {
            self.ancestors_of(canonical);
            if self.made.insert(canonical.clone()) {
                self.ops.push(match g.kind {
                    Kind::Dir => Op::Dir(canonical.clone()),
                    Kind::File | Kind::SmallFile => Op::File(canonical.clone()),
                });
            }
        }
        let attrs = eff.attrs(canonical);
        let fixup = attrs != DEFAULT_ATTRS || parent.is_some_and(|(_, _, f)| f);
        if own.private_layer && g.kind == Kind::Dir {
            self.ops.push(Op::Overlay {
                path: canonical.clone(),
                layer: self.layers,
                identity: g.identity,
            });
            self.layers += 1;
        } else {
            self.ops.push(Op::Bind {
                path: canonical.clone(),
                attrs,
                verify: g.verify,
                identity: g.identity,
                on_itself: inside,
                fixup,
            });
        }
        self.mounted
            .push((canonical.clone(), eff, fixup || own.private_layer));
    }

    /// Symlinks on the way to each grant, where they are not already part
    /// of a mounted tree.
    fn symlinks(&mut self, grants: &[Surveyed]) {
        let mut links: Vec<(PathBuf, OsString)> = grants
            .iter()
            .flat_map(|g| g.symlinks.iter().cloned())
            .collect();
        links.sort();
        links.dedup_by(|a, b| a.0 == b.0);
        for (at, text) in links {
            if self.in_mounted(&at) || self.made.contains(&at) || at.starts_with("/proc") {
                continue;
            }
            self.ancestors_of(&at);
            self.made.insert(at.clone());
            self.ops.push(Op::Symlink { at, text });
        }
    }

    /// A fresh /proc, the /dev links into it, and (with a scratch
    /// directory) the server's own /dev/shm.
    fn proc_and_dev(&mut self) {
        if self.made.insert(PathBuf::from("/proc")) {
            self.ops.push(Op::Dir(PathBuf::from("/proc")));
        }
        self.ops.push(Op::Proc);
        self.ops.push(Op::Mask(PathBuf::from("/proc/sys")));
        if self.in_mounted(Path::new("/dev")) {
            return;
        }
        if self.made.insert(PathBuf::from("/dev")) {
            self.ops.push(Op::Dir(PathBuf::from("/dev")));
        }
        for (name, text) in [
            ("fd", "/proc/self/fd"),
            ("stdin", "/proc/self/fd/0"),
            ("stdout", "/proc/self/fd/1"),
            ("stderr", "/proc/self/fd/2"),
        ] {
            let at = Path::new("/dev").join(name);
            if self.made.insert(at.clone()) {
                self.ops.push(Op::Symlink {
                    at,
                    text: OsString::from(text),
                });
            }
        }
        let shm = PathBuf::from("/dev/shm");
        if self.scratch.is_some() && !self.in_mounted(&shm) && self.made.insert(shm.clone()) {
            self.ops.push(Op::Dir(shm.clone()));
            self.ops.push(Op::Shm(shm));
        }
    }
}

/// The strict ancestors of an absolute path, outermost first, without `/`.
fn ancestors(p: &Path) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = p
        .ancestors()
        .skip(1)
        .filter(|a| a.as_os_str().len() > 1)
        .map(Path::to_path_buf)
        .collect();
    out.reverse();
    out
}

/// Survey every grant of `plan` for the view: resolve it once (recording
/// the symlinks met), tell directories from files, and for roots read the
/// identity of the object the root's handle holds. Grants under `/proc`
/// are left out (the view has a fresh `/proc`); absent optional grants are
/// skipped. `private` lists the grants that get a private layer.
pub fn survey(
    plan: &crate::plan::SandboxPlan,
    private: &[&Path],
    opened: &std::collections::HashMap<PathBuf, std::os::fd::OwnedFd>,
) -> Result<Vec<Surveyed>, super::SandboxError> {
    let mut out = Vec::with_capacity(plan.grants.len());
    for g in &plan.grants {
        if g.path.starts_with("/proc") {
            continue;
        }
        if let Some(s) = survey_grant(g, private, opened)? {
            out.push(s);
        }
    }
    for p in &plan.protected {
        if let Some(s) = survey_protected(p)? {
            out.push(s);
        }
    }
    Ok(out)
}

/// One grant as surveyed, or `None` for an absent optional one.
fn survey_grant(
    g: &crate::plan::Grant,
    private: &[&Path],
    opened: &std::collections::HashMap<PathBuf, std::os::fd::OwnedFd>,
) -> Result<Option<Surveyed>, super::SandboxError> {
    use std::os::fd::AsFd;
    let why = || {
        g.reasons
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    };
    let open_error = |source| super::SandboxError::OpenPath {
        path: g.path.clone(),
        why: why(),
        source,
    };
    let fd = match &g.handle {
        Some(h) => Some(h.as_fd()),
        None => opened.get(&g.path).map(AsFd::as_fd),
    };
    let (canonical, symlinks) = match resolve_fast(&g.path, fd) {
        Ok(r) => r,
        Err(e) if g.optional && absent(&e) => return Ok(None),
        Err(e) if absent(&e) => {
            return Err(super::SandboxError::MissingPath {
                path: g.path.clone(),
                why: why(),
            });
        }
        Err(source) => return Err(open_error(source)),
    };
    let md = match fd {
        Some(fd) => rustix::fs::fstat(fd)
            .map(|st| {
                let t = rustix::fs::FileType::from_raw_mode(st.st_mode);
                (
                    t.is_dir(),
                    t.is_file() && (st.st_size as u64) <= COPY_MAX,
                    (st.st_dev, st.st_ino),
                )
            })
            .map_err(std::io::Error::from),
        None => std::fs::metadata(&canonical).map(|m| {
            use std::os::unix::fs::MetadataExt;
            (
                m.is_dir(),
                m.is_file() && m.len() <= COPY_MAX,
                (m.dev(), m.ino()),
            )
        }),
    };
    let identity = md.as_ref().ok().map(|m| m.2);
    let kind = match md.map(|m| (m.0, m.1)) {
        Ok((true, _)) => Kind::Dir,
        Ok((false, true)) => Kind::SmallFile,
        Ok((false, false)) => Kind::File,
        Err(e) if g.optional && absent(&e) => return Ok(None),
        Err(source) => return Err(open_error(source)),
    };
    let verify = match &g.handle {
        Some(h) => {
            let st = rustix::fs::fstat(h.as_fd()).map_err(|e| open_error(e.into()))?;
            Some((st.st_dev, st.st_ino))
        }
        None => None,
    };
    Ok(Some(Surveyed {
        path: g.path.clone(),
        canonical,
        kind,
        write: g.rights.write,
        exec: g.rights.exec,
        root: g
            .reasons
            .iter()
            .any(|r| matches!(r, crate::plan::GrantReason::Root { .. })),
        // A root's identity is its handle's (the object ruled on).
        identity: verify.or(identity),
        verify,
        private_layer: private.contains(&g.path.as_path()),
        protect: None,
        symlinks,
    }))
}

/// A protected path as surveyed: only a real file or directory at its own
/// canonical path inside a granted tree, never through a symlink (which
/// would put whatever it points at into the view). One descriptor is
/// looked at for all of it, and the child mounts the object only if it
/// finds that very one at the path (a server of the same root may swap
/// things under it meanwhile).
fn survey_protected(p: &crate::plan::Protected) -> Result<Option<Surveyed>, super::SandboxError> {
    let (is_dir, identity) = match real_at(&p.path) {
        // Another directory than the one whose entries the plan protects:
        // its own entries would be left writable.
        Ok(Some((_, found))) if p.identity.is_some_and(|want| want != found) => {
            return Err(super::SandboxError::OpenPath {
                path: p.path.clone(),
                why: format!("{} (mounted read-only)", p.why),
                source: std::io::Error::from_raw_os_error(libc::ESTALE),
            });
        }
        Ok(Some(found)) => found,
        // Gone: nothing left to protect (what the server makes there is new
        // metadata, reported when it ends).
        Ok(None) => return Ok(None),
        // Not the real file or directory at its own path any more: a
        // symlink was put in its place or on its way since the root was
        // scanned. Refuse to launch rather than leave it writable.
        Err(source) => {
            return Err(super::SandboxError::OpenPath {
                path: p.path.clone(),
                why: format!("{} (mounted read-only)", p.why),
                source,
            });
        }
    };
    Ok(Some(Surveyed {
        path: p.path.clone(),
        canonical: p.path.clone(),
        kind: if is_dir { Kind::Dir } else { Kind::File },
        write: !p.readonly,
        exec: false,
        root: true,
        verify: None,
        identity: Some(identity),
        private_layer: false,
        protect: Some(p.readonly),
        symlinks: Vec::new(),
    }))
}

/// Whether `path` names a file or directory (not a symlink) at its own
/// canonical path, and its (device, inode), from one `O_PATH | O_NOFOLLOW`
/// descriptor: `Ok(None)` when nothing is there, an error (`ELOOP`,
/// `ESTALE`) when something else is (a symlink, or a path that resolves
/// elsewhere).
fn real_at(path: &Path) -> std::io::Result<Option<(bool, (u64, u64))>> {
    use std::os::fd::AsRawFd;
    let fd = match rustix::fs::open(
        path,
        rustix::fs::OFlags::PATH | rustix::fs::OFlags::NOFOLLOW | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(rustix::io::Errno::NOENT) => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let st = rustix::fs::fstat(&fd)?;
    let t = rustix::fs::FileType::from_raw_mode(st.st_mode);
    if t.is_symlink() {
        return Err(std::io::Error::from_raw_os_error(libc::ELOOP));
    }
    let real = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))?;
    if real != path {
        return Err(std::io::Error::from_raw_os_error(libc::ESTALE));
    }
    Ok(Some((t.is_dir(), (st.st_dev, st.st_ino))))
}

fn absent(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOENT) | Some(libc::ENOTDIR) | Some(libc::ELOOP)
    )
}

/// [`resolve_recording`], with one open and one `readlink` of its
/// `/proc/self/fd` entry when the path holds no symlink (the common case).
fn resolve_fast(
    path: &Path,
    fd: Option<std::os::fd::BorrowedFd<'_>>,
) -> std::io::Result<(PathBuf, Vec<(PathBuf, OsString)>)> {
    use std::os::fd::{AsFd, AsRawFd};
    let owned;
    let fd = match fd {
        Some(fd) => fd,
        None => {
            owned = rustix::fs::open(
                path,
                rustix::fs::OFlags::PATH | rustix::fs::OFlags::CLOEXEC,
                rustix::fs::Mode::empty(),
            )?;
            owned.as_fd()
        }
    };
    let real = std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd()))?;
    if real == path {
        return Ok((real, Vec::new()));
    }
    resolve_recording(path)
}

/// Resolve `path` the way the kernel would (following every symlink),
/// recording each symlink met: where it lives and its text.
///
/// Fails like `realpath` (`ENOENT`, `ELOOP` after 40 links, `ENOTDIR`).
pub fn resolve_recording(path: &Path) -> std::io::Result<(PathBuf, Vec<(PathBuf, OsString)>)> {
    let mut pending: std::collections::VecDeque<OsString> = std::collections::VecDeque::new();
    let mut cur = PathBuf::from("/");
    let push_components =
        |pending: &mut std::collections::VecDeque<OsString>, p: &Path, front: bool| {
            let comps: Vec<OsString> = p
                .components()
                .filter_map(|c| match c {
                    Component::Normal(n) => Some(n.to_os_string()),
                    Component::ParentDir => Some(OsString::from("..")),
                    _ => None,
                })
                .collect();
            if front {
                for c in comps.into_iter().rev() {
                    pending.push_front(c);
                }
            } else {
                pending.extend(comps);
            }
        };
    if !path.is_absolute() {
        return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
    }
    push_components(&mut pending, path, false);
    let mut links = Vec::new();
    let mut hops = 0;
    while let Some(c) = pending.pop_front() {
        if c == ".." {
            cur.pop();
            continue;
        }
        let next = cur.join(&c);
        let md = std::fs::symlink_metadata(&next)?;
        if md.file_type().is_symlink() {
            hops += 1;
            if hops > 40 {
                return Err(std::io::Error::from_raw_os_error(libc::ELOOP));
            }
            let text = std::fs::read_link(&next)?;
            links.push((next, text.clone().into_os_string()));
            if text.is_absolute() {
                cur = PathBuf::from("/");
            }
            push_components(&mut pending, &text, true);
        } else {
            if !pending.is_empty() && !md.is_dir() {
                return Err(std::io::Error::from_raw_os_error(libc::ENOTDIR));
            }
            cur = next;
        }
    }
    Ok((cur, links))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_protected_directory_that_is_not_the_one_listed_refuses_the_launch() {
        let t = tempfile::tempdir().unwrap();
        let git = std::fs::canonicalize(t.path()).unwrap().join(".git");
        std::fs::create_dir_all(&git).unwrap();
        let md = std::fs::metadata(&git).unwrap();
        use std::os::unix::fs::MetadataExt;
        let p = |identity| crate::plan::Protected {
            path: git.clone(),
            readonly: false,
            why: ".git in root".into(),
            identity,
        };
        let listed = survey_protected(&p(Some((md.dev(), md.ino())))).unwrap();
        assert_eq!(listed.map(|s| s.identity), Some(Some((md.dev(), md.ino()))));
        let other = survey_protected(&p(Some((md.dev(), md.ino() + 1))));
        assert!(
            matches!(&other, Err(crate::sandbox::SandboxError::OpenPath { source, .. }) if source.raw_os_error() == Some(libc::ESTALE)),
            "{other:?}"
        );
    }

    fn g(path: &str, write: bool, exec: bool) -> Surveyed {
        Surveyed::plain_dir(Path::new(path), write, exec)
    }

    fn binds(ops: &[Op]) -> Vec<(String, Attrs)> {
        ops.iter()
            .filter_map(|o| match o {
                Op::Bind { path, attrs, .. } => Some((path.display().to_string(), *attrs)),
                _ => None,
            })
            .collect()
    }

    const RO: Attrs = Attrs {
        readonly: true,
        noexec: false,
        nodev: true,
    };

    #[test]
    fn the_private_home_is_mounted_before_the_grants_below_it_which_keep_their_rights() {
        let mut cache = g("/home/u/.cache/uv", false, true);
        cache.private_layer = true;
        let mut linked = g("/opt/nvm/versions/node/v22", false, true);
        linked.path = "/home/u/.nvm/versions/node/v22".into();
        linked.symlinks = vec![("/home/u/.nvm".into(), "/opt/nvm".into())];
        let files = [("/tmp/s/gitconfig".into(), ".gitconfig".into())];
        let home = PrivateHome {
            path: Path::new("/home/u"),
            files: &files,
            store: None,
        };
        let ops = plan_view(
            &[
                g("/usr", false, true),
                g("/home/u/.pyenv", false, true),
                cache,
                g("/home/u/work", true, false),
                linked,
            ],
            None,
            Some(home),
        );
        let at = |want: &Op| ops.iter().position(|o| o == want).unwrap();
        let tmpfs = at(&Op::Tmpfs("/home/u".into()));
        // The home's mount point, the tmpfs, the file put in it, then the
        // grants below it, each made a mount point inside it.
        assert!(at(&Op::Dir("/home/u".into())) < tmpfs);
        assert_eq!(
            ops[tmpfs + 1],
            Op::CopyTo {
                from: "/tmp/s/gitconfig".into(),
                to: "/home/u/.gitconfig".into()
            }
        );
        for p in [
            "/home/u/.pyenv",
            "/home/u/.cache",
            "/home/u/.cache/uv",
            "/home/u/work",
        ] {
            assert!(at(&Op::Dir(p.into())) > tmpfs, "{p}: {ops:?}");
        }
        // Each keeps its own rights: the home's write right does not reach
        // into the toolchain, and none is taken for host content below a
        // mounted grant.
        let b = binds(&ops);
        assert!(b.contains(&("/home/u/.pyenv".to_string(), RO)), "{b:?}");
        assert!(ops.iter().all(
            |o| !matches!(o, Op::Bind { path, on_itself: true, .. } if path.starts_with("/home/u"))
        ));
        assert!(ops.iter().any(
            |o| matches!(o, Op::Overlay { path, .. } if path == Path::new("/home/u/.cache/uv"))
        ));
        // The link on the way to a grant is recreated inside the home.
        assert!(ops.contains(&Op::Symlink {
            at: "/home/u/.nvm".into(),
            text: "/opt/nvm".into()
        }));
        // A grant of the home itself (or above it) wins: no private home.
        let ops = plan_view(&[g("/home", false, false)], None, Some(home));
        assert!(!ops.iter().any(|o| matches!(o, Op::Tmpfs(_))), "{ops:?}");
    }

    #[test]
    fn nested_grants_with_the_same_rights_are_not_mounted_twice() {
        let ops = plan_view(
            &[
                g("/usr", false, true),
                g("/usr/lib/node", false, true),
                g("/usr/bin/python3", false, true),
            ],
            None,
            None,
        );
        assert_eq!(
            binds(&ops),
            [(
                "/usr".to_string(),
                Attrs {
                    readonly: true,
                    noexec: false,
                    nodev: true
                }
            )]
        );
    }

    #[test]
    fn a_writable_root_inside_a_read_only_tree_is_mounted_on_top() {
        let mut root = g("/srv/data/proj", true, false);
        root.root = true;
        root.verify = Some((1, 2));
        let ops = plan_view(&[g("/srv/data", false, false), root], None, None);
        let b = binds(&ops);
        assert_eq!(b[0], ("/srv/data".into(), RO));
        assert_eq!(
            b[1],
            (
                "/srv/data/proj".into(),
                Attrs {
                    readonly: false,
                    noexec: true,
                    nodev: true
                }
            )
        );
        // The nested mount point exists in the outer bind: no Dir for it.
        assert!(!ops.contains(&Op::Dir("/srv/data/proj".into())));
        assert!(ops.contains(&Op::Dir("/srv".into())));
    }

    #[test]
    fn rights_flow_down_as_landlock_combines_them() {
        // A read-only grant inside a writable root stays writable there.
        let ops = plan_view(
            &[g("/w", true, false), g("/w/sub", false, false)],
            None,
            None,
        );
        assert_eq!(binds(&ops).len(), 1);
    }

    #[test]
    fn a_root_without_exec_is_noexec_even_read_only() {
        let mut r = g("/data/ro", false, false);
        r.root = true;
        let ops = plan_view(&[r], None, None);
        assert!(binds(&ops)[0].1.noexec);
        assert!(binds(&ops)[0].1.readonly);
        // A runtime read-only tree may map its files executable.
        let ops = plan_view(&[g("/opt/lib", false, false)], None, None);
        assert!(!binds(&ops)[0].1.noexec);
    }

    #[test]
    fn scratch_is_writable_and_never_executable() {
        let ops = plan_view(&[], Some(Path::new("/tmp/rootfence-1-ab")), None);
        assert_eq!(
            binds(&ops),
            [(
                "/tmp/rootfence-1-ab".to_string(),
                Attrs {
                    readonly: false,
                    noexec: true,
                    nodev: true
                }
            )]
        );
        assert!(ops.contains(&Op::Dir("/tmp".into())));
    }

    #[test]
    fn dev_shm_is_the_servers_own_with_a_scratch_directory_only() {
        let ops = plan_view(&[], Some(Path::new("/tmp/rootfence-1-ab")), None);
        let at = |op: &Op| ops.iter().position(|o| o == op);
        let shm = at(&Op::Shm("/dev/shm".into())).expect("a /dev/shm");
        assert!(at(&Op::Dir("/dev/shm".into())) < Some(shm));
        // Without scratch space there is none (the host's is never bound).
        let ops = plan_view(&[], None, None);
        assert!(!ops.iter().any(|o| o.target() == Path::new("/dev/shm")));
        // A host /dev mounted whole keeps its own.
        let ops = plan_view(
            &[g("/dev", true, false)],
            Some(Path::new("/tmp/rootfence-1-ab")),
            None,
        );
        assert!(!ops.iter().any(|o| matches!(o, Op::Shm(_))));
    }

    #[test]
    fn scratch_inside_a_writable_root_is_still_mounted() {
        // `--root /tmp`: the scratch directory is below the root, with the
        // same rights; it is mounted all the same (a sized scratch
        // filesystem is not the host's directory).
        let mut root = g("/tmp", true, false);
        root.root = true;
        let ops = plan_view(&[root], Some(Path::new("/tmp/rootfence-1-ab")), None);
        let b = binds(&ops);
        assert!(b.iter().any(|(p, _)| p == "/tmp/rootfence-1-ab"), "{ops:?}");
    }

    #[test]
    fn proc_grants_become_a_fresh_proc_and_dev_links_point_into_it() {
        let mut null = g("/dev/null", true, false);
        null.kind = Kind::File;
        let ops = plan_view(&[g("/proc/cpuinfo", false, false), null], None, None);
        assert!(ops.contains(&Op::Proc));
        assert!(!binds(&ops).iter().any(|(p, _)| p.starts_with("/proc")));
        let (_, a) = &binds(&ops)[0];
        assert!(!a.nodev, "device files must stay usable");
        assert!(ops.contains(&Op::File("/dev/null".into())));
        assert!(ops.contains(&Op::Symlink {
            at: "/dev/fd".into(),
            text: "/proc/self/fd".into()
        }));
    }

    #[test]
    fn symlinks_on_the_way_are_recreated_outside_mounted_trees() {
        let mut bin = g("/bin", false, true);
        bin.canonical = "/usr/bin".into();
        bin.symlinks = vec![("/bin".into(), "usr/bin".into())];
        let mut lib = g("/usr/lib/x", false, true);
        lib.symlinks = vec![("/usr/lib/y".into(), "x".into())];
        let ops = plan_view(&[g("/usr", false, true), bin, lib], None, None);
        assert!(ops.contains(&Op::Symlink {
            at: "/bin".into(),
            text: "usr/bin".into()
        }));
        // Inside the mounted /usr the link exists already.
        assert!(!ops.iter().any(|o| o.target() == Path::new("/usr/lib/y")));
        assert_eq!(binds(&ops).len(), 1);
    }

    #[test]
    fn protected_control_files_are_read_only_inside_a_writable_root() {
        let mut root = g("/w", true, false);
        root.root = true;
        let mut git = g("/w/.git", true, false);
        git.protect = Some(false);
        let mut config = g("/w/.git/config", false, false);
        config.kind = Kind::File;
        config.protect = Some(true);
        let ops = plan_view(&[root, git, config], None, None);
        let b = binds(&ops);
        assert_eq!(b.len(), 3, "{ops:?}");
        assert!(!b[0].1.readonly);
        // The .git directory is pinned: mounted on itself, still writable.
        assert_eq!(b[1].0, "/w/.git");
        assert!(!b[1].1.readonly);
        assert_eq!(b[2].0, "/w/.git/config");
        assert!(b[2].1.readonly && b[2].1.noexec);
    }

    #[test]
    fn private_layers_are_overlays() {
        let mut c = g("/home/u/.npm", false, true);
        c.private_layer = true;
        let ops = plan_view(&[c], None, None);
        assert!(ops.contains(&Op::Overlay {
            path: "/home/u/.npm".into(),
            layer: 0,
            identity: None,
        }));
        assert!(binds(&ops).is_empty());
    }

    #[test]
    fn parents_come_before_children() {
        let mut r = g("/a/b/c", true, false);
        r.root = true;
        let ops = plan_view(&[r, g("/a/x", false, false)], None, None);
        let pos = |p: &str| ops.iter().position(|o| o.target() == Path::new(p)).unwrap();
        assert!(pos("/a") < pos("/a/b"));
        assert!(pos("/a/b") < pos("/a/b/c"));
    }

    #[test]
    fn resolving_records_every_link() {
        let t = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(t.path()).unwrap();
        std::fs::create_dir_all(base.join("real/inner")).unwrap();
        std::os::unix::fs::symlink("real", base.join("l1")).unwrap();
        std::os::unix::fs::symlink(base.join("l1/inner"), base.join("l2")).unwrap();
        let (c, links) = resolve_recording(&base.join("l2")).unwrap();
        assert_eq!(c, base.join("real/inner"));
        assert_eq!(
            links,
            vec![
                (base.join("l2"), base.join("l1/inner").into_os_string()),
                (base.join("l1"), "real".into())
            ]
        );
        assert_eq!(
            resolve_recording(&base.join("missing")).unwrap_err().kind(),
            std::io::ErrorKind::NotFound
        );
        std::os::unix::fs::symlink("loop", base.join("loop")).unwrap();
        assert_eq!(
            resolve_recording(&base.join("loop"))
                .unwrap_err()
                .raw_os_error(),
            Some(libc::ELOOP)
        );
    }
}
