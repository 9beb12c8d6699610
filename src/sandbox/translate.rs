//! The view's translation: the pure plan of mounts ([`super::view`]) turned
//! into the operations the child carries out ([`super::mount::ViewOp`]):
//! C strings of paths in the view and below the host's tree, the overlay
//! options naming each lower layer by descriptor, the sized scratch
//! filesystem and where its directories go.

use std::collections::HashMap;
use std::ffi::{CString, OsStr};
use std::io;
use std::os::fd::{OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::SandboxError;
use super::mount::{
    HOST, MOUNT_ATTR_NODEV, MOUNT_ATTR_NOEXEC, MOUNT_ATTR_NOSUID, MOUNT_ATTR_RDONLY,
    SCRATCH_STAGING, ViewOp,
};
use super::resources::ScratchSize;
use super::view::{self, Op};
use crate::plan::SandboxPlan;

/// The kind of a view operation, for telling a refused feature from an
/// error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpKind {
    /// The fresh `/proc`.
    Proc,
    /// A private layer's overlay.
    Overlay,
    /// A small file copied in.
    Copy,
    /// The private home (a tmpfs of the server's own).
    Home,
    /// The server's own `/dev/shm` (a directory of its scratch space).
    Shm,
    /// Anything else.
    Other,
}

/// A view operation's target and kind, for naming it in errors.
pub type Target = (PathBuf, OpKind);

/// The directory of the scratch space bound at the server's `/dev/shm`.
pub const SHM_DIR: &str = ".rootfence-shm";

/// The descriptor numbers the child puts each overlay's lower layer at
/// (below the usual soft limit of 1024 open files).
const OVERLAY_SLOT: RawFd = 900;

/// The server's scratch directory as the view holds it.
#[derive(Debug, Clone, Copy)]
pub struct ScratchView<'a> {
    /// Its path (the host's directory, and the same path in the view).
    pub path: &'a Path,
    /// A sized filesystem of its own, or the host's directory bound.
    pub size: Option<ScratchSize>,
    /// Directories (relative) the child makes in the sized filesystem.
    pub dirs: &'a [PathBuf],
}

impl ScratchView<'_> {
    /// Where the child finds `rel` (below the scratch directory) while it
    /// builds the view.
    fn staged(&self, rel: &Path) -> PathBuf {
        match self.size {
            Some(_) => Path::new(SCRATCH_STAGING).join(rel),
            None => self.on_host(rel),
        }
    }

    /// Where the child finds a private layer's directory `rel`: in the
    /// sized filesystem when it holds the layers, else on the host.
    fn layer(&self, rel: &Path) -> PathBuf {
        match self.size {
            Some(s) if s.holds_layers => self.staged(rel),
            _ => self.on_host(rel),
        }
    }

    /// `rel` in the host's scratch directory, below [`HOST`].
    fn on_host(&self, rel: &Path) -> PathBuf {
        Path::new(HOST).join(
            self.path
                .join(rel)
                .strip_prefix("/")
                .unwrap_or(Path::new("")),
        )
    }
}

/// A private layer: the directory it covers, and its directory in scratch
/// (relative).
pub type Layer = (PathBuf, PathBuf);

/// The view's operations, ready for the child, and each one's target.
pub fn view_ops(
    plan: &SandboxPlan,
    scratch: Option<ScratchView<'_>>,
    layers: &[Layer],
    opened: &HashMap<PathBuf, OwnedFd>,
    store: Option<&crate::store::Ready>,
) -> Result<(Vec<ViewOp>, Vec<Target>), SandboxError> {
    let private: Vec<&Path> = layers.iter().map(|(p, _)| p.as_path()).collect();
    let surveyed = view::survey(plan, &private, opened)?;
    // Files rootfence wrote for the server in its scratch directory: also
    // put in its private home when the plan says so.
    let home_files: Vec<(PathBuf, std::ffi::OsString)> = match scratch {
        Some(s) => plan
            .scratch_files
            .iter()
            .filter_map(|f| Some((s.path.join(&f.name), f.home.clone()?.into())))
            .collect(),
        None => Vec::new(),
    };
    let home = private_home(plan);
    let ops = view::plan_view(
        &surveyed,
        scratch.map(|s| s.path),
        home.as_deref().map(|path| view::PrivateHome {
            path,
            files: &home_files,
            store: store.map(|s| (s.home.as_path(), s.identity)),
        }),
    );
    if let (Some(store), Some(home)) = (store, home.as_deref()) {
        let made: Vec<(PathBuf, crate::store::Made)> = ops
            .iter()
            .filter_map(|op| {
                let what = match op {
                    Op::Dir(_) => crate::store::Made::Dir,
                    Op::File(_) | Op::CopyTo { .. } => crate::store::Made::File,
                    Op::Symlink { .. } => crate::store::Made::Link,
                    _ => return None,
                };
                let rel = op.target().strip_prefix(home).ok()?;
                (!rel.as_os_str().is_empty()).then(|| (rel.to_path_buf(), what))
            })
            .collect();
        for (from, to) in crate::store::clear_way(&store.home, &made) {
            tracing::warn!(
                "the server had left {} in its store where rootfence builds its view: moved to {}",
                from.display(),
                to.display()
            );
        }
    }
    let mut targets: Vec<Target> = Vec::with_capacity(ops.len() + 1);
    let mut out = Vec::with_capacity(ops.len() + 1);
    if let Some(s) = scratch
        && let Some(size) = s.size
    {
        out.push(ViewOp::ScratchFs {
            opts: cstring(
                OsStr::new(&format!(
                    "size={},nr_inodes={},mode=0700",
                    size.bytes, size.inodes
                )),
                "the scratch filesystem's options",
            )?,
            dirs: s
                .dirs
                .iter()
                .map(|d| cpath("", &s.staged(d)))
                .collect::<Result<_, _>>()?,
        });
        targets.push((s.path.to_path_buf(), OpKind::Other));
    }
    for op in ops {
        targets.push((op.target().to_path_buf(), kind(&op)));
        out.push(translate(op, scratch, layers)?);
    }
    // A sized scratch filesystem starts empty: the files written for the
    // server in the host's scratch directory are copied in.
    if let Some(s) = scratch
        && s.size.is_some()
    {
        for f in &plan.scratch_files {
            let at = s.path.join(&f.name);
            targets.push((at.clone(), OpKind::Other));
            out.push(ViewOp::Copy {
                src: cpath("", &s.on_host(Path::new(&f.name)))?,
                dst: cpath("", &at)?,
            });
        }
    }
    Ok((out, targets))
}

/// Size of the server's private home directory.
const PRIVATE_HOME_MIB: u64 = 256;

/// The plan's private home directory, canonical, when it is a directory.
pub fn private_home(plan: &SandboxPlan) -> Option<PathBuf> {
    let h = plan.private_home.as_ref()?;
    std::fs::canonicalize(h).ok().filter(|c| c.is_dir())
}

fn kind(op: &Op) -> OpKind {
    match op {
        Op::Proc => OpKind::Proc,
        Op::Overlay { .. } => OpKind::Overlay,
        Op::Copy(_) => OpKind::Copy,
        Op::Tmpfs(_) | Op::Store { .. } => OpKind::Home,
        Op::Shm(_) => OpKind::Shm,
        _ => OpKind::Other,
    }
}

/// One operation for the child.
fn translate(
    op: Op,
    scratch: Option<ScratchView<'_>>,
    layers: &[Layer],
) -> Result<ViewOp, SandboxError> {
    Ok(match op {
        Op::Dir(p) => ViewOp::Dir(cpath("", &p)?),
        Op::File(p) => ViewOp::File(cpath("", &p)?),
        Op::Copy(p) => ViewOp::Copy {
            src: cpath(HOST, &p)?,
            dst: cpath("", &p)?,
        },
        Op::Symlink { at, text } => ViewOp::Symlink {
            at: cpath("", &at)?,
            text: cstring(&text, "a symlink")?,
        },
        Op::Bind {
            path,
            attrs,
            verify,
            identity,
            on_itself,
            fixup,
        } => {
            // The sized scratch filesystem is bound from where it was made.
            let sized = scratch.filter(|s| s.size.is_some() && s.path == path);
            ViewOp::Bind {
                fixup,
                src: match sized {
                    Some(_) => cpath(SCRATCH_STAGING, Path::new(""))?,
                    None => cpath(HOST, &path)?,
                },
                dst: cpath("", &path)?,
                attrs: MOUNT_ATTR_NOSUID
                    | if attrs.readonly { MOUNT_ATTR_RDONLY } else { 0 }
                    | if attrs.noexec { MOUNT_ATTR_NOEXEC } else { 0 }
                    | if attrs.nodev { MOUNT_ATTR_NODEV } else { 0 },
                identity: if sized.is_some() {
                    None
                } else {
                    verify.or(identity)
                },
                on_itself,
            }
        }
        Op::Overlay {
            path,
            layer,
            identity,
        } => overlay(path, layer, identity, scratch, layers)?,
        Op::Proc => ViewOp::Proc {
            dst: c"/proc".to_owned(),
        },
        // Bound from the scratch space (its own filesystem, or the host's
        // directory), so that it is counted in it.
        Op::Shm(p) => ViewOp::Bind {
            src: match scratch {
                Some(s) => cpath("", &s.staged(Path::new(SHM_DIR)))?,
                None => {
                    return Err(SandboxError::Launcher(io::Error::other(
                        "/dev/shm without a scratch directory",
                    )));
                }
            },
            dst: cpath("", &p)?,
            attrs: MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
            fixup: true,
            identity: None,
            on_itself: false,
        },
        Op::Mask(p) => ViewOp::Mask {
            dst: cpath("", &p)?,
        },
        Op::Tmpfs(p) => ViewOp::Tmpfs {
            dst: cpath("", &p)?,
            opts: cstring(
                OsStr::new(&format!("mode=0700,size={PRIVATE_HOME_MIB}m")),
                "tmpfs options",
            )?,
        },
        Op::Store {
            path,
            store,
            identity,
        } => ViewOp::Bind {
            src: cpath(HOST, &store)?,
            dst: cpath("", &path)?,
            attrs: MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC,
            fixup: true,
            identity: Some(identity),
            on_itself: false,
        },
        Op::CopyTo { from, to } => ViewOp::Copy {
            src: cpath(HOST, &from)?,
            dst: cpath("", &to)?,
        },
    })
}

/// The overlay of private layer `layer` at `path`: its lower layer by
/// descriptor, through the host's `/proc` (the view's is not mounted yet),
/// its upper and work directories where the scratch directory is staged.
fn overlay(
    path: PathBuf,
    layer: usize,
    identity: Option<(u64, u64)>,
    scratch: Option<ScratchView<'_>>,
    layers: &[Layer],
) -> Result<ViewOp, SandboxError> {
    let missing =
        || SandboxError::Launcher(io::Error::other("private layer without its directory"));
    let (_, dir) = layers
        .iter()
        .find(|(p, _)| *p == path)
        .ok_or_else(missing)?;
    let s = scratch.ok_or_else(missing)?;
    let slot = OVERLAY_SLOT + layer as RawFd;
    let mut data = format!("lowerdir={HOST}/proc/self/fd/{slot}").into_bytes();
    data.extend_from_slice(b",upperdir=");
    data.extend_from_slice(s.layer(&dir.join("upper")).as_os_str().as_bytes());
    data.extend_from_slice(b",workdir=");
    data.extend_from_slice(s.layer(&dir.join("work")).as_os_str().as_bytes());
    data.extend_from_slice(b",userxattr");
    Ok(ViewOp::Overlay {
        dst: cpath("", &path)?,
        data: cstring(OsStr::from_bytes(&data), "overlay options")?,
        lower: cpath(HOST, &path)?,
        identity,
        slot,
    })
}

/// Whether a path can go into overlayfs mount options unescaped.
pub fn overlay_safe(p: &Path) -> bool {
    !p.as_os_str()
        .as_bytes()
        .iter()
        .any(|b| matches!(b, b',' | b':' | b'\\' | b'=') || b.is_ascii_whitespace())
}

/// `s` as a C string, or an error naming `what` when it holds a NUL.
pub fn cstring(s: &OsStr, what: &str) -> Result<CString, SandboxError> {
    CString::new(s.as_bytes()).map_err(|_| {
        SandboxError::Launcher(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{what} contains a NUL byte: {}", s.to_string_lossy()),
        ))
    })
}

/// `prefix` followed by the path `p`, as a C string.
pub fn cpath(prefix: &str, p: &Path) -> Result<CString, SandboxError> {
    let mut v = prefix.as_bytes().to_vec();
    v.extend_from_slice(p.as_os_str().as_bytes());
    cstring(OsStr::from_bytes(&v), "a path")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The scratch directory bound from the host.
    fn host() -> ScratchView<'static> {
        ScratchView {
            path: Path::new("/tmp/rootfence-1-ab"),
            size: None,
            dirs: &[],
        }
    }

    /// The same scratch directory as a sized filesystem of its own.
    fn sized_scratch(holds_layers: bool) -> ScratchView<'static> {
        ScratchView {
            size: Some(ScratchSize {
                bytes: 1 << 20,
                inodes: 1024,
                holds_layers,
            }),
            ..host()
        }
    }

    #[test]
    fn the_scratch_is_staged_on_the_host_or_in_its_own_filesystem() {
        let host = host();
        assert_eq!(
            host.staged(Path::new(".rootfence-layer-0/upper")),
            Path::new("/.rootfence-host/tmp/rootfence-1-ab/.rootfence-layer-0/upper")
        );
        let sized = sized_scratch(true);
        assert_eq!(
            sized.layer(Path::new(".rootfence-layer-0/upper")),
            Path::new("/.rootfence-scratch/.rootfence-layer-0/upper")
        );
        let sized_without_layers = sized_scratch(false);
        assert_eq!(
            sized_without_layers.layer(Path::new(".rootfence-layer-0/upper")),
            Path::new("/.rootfence-host/tmp/rootfence-1-ab/.rootfence-layer-0/upper")
        );
        assert_eq!(
            sized_without_layers.staged(Path::new(".rootfence-layer-0")),
            Path::new("/.rootfence-scratch/.rootfence-layer-0")
        );
    }

    #[test]
    fn dev_shm_is_bound_from_the_scratch_space_writable_and_noexec() {
        let host = host();
        let sized = sized_scratch(true);
        for (s, src) in [
            (host, "/.rootfence-host/tmp/rootfence-1-ab/.rootfence-shm"),
            (sized, "/.rootfence-scratch/.rootfence-shm"),
        ] {
            let op = translate(Op::Shm("/dev/shm".into()), Some(s), &[]).expect("translated");
            let ViewOp::Bind {
                src: from,
                dst,
                attrs,
                fixup,
                ..
            } = op
            else {
                panic!("{op:?}");
            };
            assert_eq!(from.to_str(), Ok(src));
            assert_eq!(dst.to_str(), Ok("/dev/shm"));
            assert_eq!(
                attrs,
                MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC
            );
            assert!(fixup, "its own attributes: writable, unlike the view");
        }
        assert!(translate(Op::Shm("/dev/shm".into()), None, &[]).is_err());
    }

    #[test]
    fn overlay_options_refuse_separators() {
        assert!(overlay_safe(Path::new("/home/me/.npm")));
        assert!(!overlay_safe(Path::new("/home/me/a,b")));
        assert!(!overlay_safe(Path::new("/home/me/a b")));
    }
}
