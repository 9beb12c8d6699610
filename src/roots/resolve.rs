//! Resolving a root: parse, open once, read the canonical path back from the
//! open handle, then rule on that canonical path.

use std::ffi::OsString;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustix::fs::{FileType, Mode, OFlags};
use rustix::io::Errno;

use super::uri::{parse_file_uri, path_to_uri};
use super::{CanonicalRoot, Refusal, RefusalReason, RootInput, RootKind, RootRules};

/// An open `O_PATH` handle on a resolved root.
///
/// Cloning shares the descriptor. The descriptor is close-on-exec; the
/// sandbox builds its Landlock rule for the root from this handle.
#[derive(Debug, Clone)]
pub struct RootHandle {
    fd: Arc<OwnedFd>,
}

impl RootHandle {
    /// A capability-based directory handle on the root, for every file
    /// operation rootfence itself makes inside it (all look-ups beneath it
    /// use `openat2(RESOLVE_BENEATH)` semantics via cap-std).
    ///
    /// Fails with `ENOTDIR` for a file root.
    pub fn dir(&self) -> std::io::Result<cap_std::fs::Dir> {
        let fd = rustix::fs::openat(
            self.fd.as_fd(),
            ".",
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(cap_std::fs::Dir::from_std_file(std::fs::File::from(fd)))
    }

    /// Whether the handle still refers to the object at `path` (same device
    /// and inode). Used to notice a root deleted, renamed or replaced.
    pub fn still_at(&self, path: &Path) -> bool {
        let (Ok(a), Ok(b)) = (rustix::fs::fstat(&*self.fd), rustix::fs::stat(path)) else {
            return false;
        };
        a.st_dev == b.st_dev && a.st_ino == b.st_ino
    }
}

#[cfg(test)]
impl RootHandle {
    /// A handle on no file (a pipe's read end, its write end closed): for
    /// plans made without a filesystem (the session's model test).
    pub(crate) fn detached() -> RootHandle {
        let (read, _write) = rustix::pipe::pipe().expect("a pipe");
        RootHandle { fd: Arc::new(read) }
    }
}

impl AsFd for RootHandle {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Resolve every input, returning accepted roots and refusals in input
/// order.
pub fn resolve_all(inputs: &[RootInput], rules: &RootRules) -> (Vec<CanonicalRoot>, Vec<Refusal>) {
    let mut ok = Vec::new();
    let mut refused = Vec::new();
    for input in inputs {
        match resolve(input, rules) {
            Ok(root) => ok.push(root),
            Err(r) => refused.push(r),
        }
    }
    (ok, refused)
}

/// Validate and canonicalize one root.
///
/// # Security
///
/// The root is opened exactly once (following symlinks, `O_PATH`); its
/// canonical path is read back from that descriptor, and the ceiling, deny
/// and `/` checks rule on that canonical path. The returned handle is the
/// object that was checked, whatever happens to the path string later.
pub fn resolve(input: &RootInput, rules: &RootRules) -> Result<CanonicalRoot, Refusal> {
    let refuse = |reason: RefusalReason| Refusal {
        input: input.raw.clone(),
        from: input.source,
        reason,
    };
    if !rules.sources.is_empty() && !rules.sources.contains(&input.source) {
        return Err(refuse(RefusalReason::SourceNotAllowed(input.source)));
    }
    let requested = requested_path(input, rules).map_err(refuse)?;
    let (fd, kind) = open_root(&requested).map_err(refuse)?;
    let path = canonical_path_of(&fd, &requested).map_err(refuse)?;
    check_filesystem(&fd, &path).map_err(refuse)?;
    check_rules(&path, rules).map_err(refuse)?;
    let name = match &input.name {
        Some(n) => n.clone(),
        None => path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "/".to_string()),
    };
    let handle = RootHandle { fd: Arc::new(fd) };
    let control = match (kind, handle.dir()) {
        (RootKind::Directory, Ok(d)) => super::control::scan(&d, &path),
        _ => (Vec::new(), false),
    };
    Ok(CanonicalRoot {
        control,
        uri: path_to_uri(&path),
        path,
        name,
        access: input.access,
        kind,
        source: input.source,
        input: input.raw.clone(),
        handle,
    })
}

/// Whether a command-line or policy root is written as a URI.
///
/// Compares bytes: slicing the `str` at byte 5 would panic when a multi-byte
/// character straddles it (`abcdé`).
pub(crate) fn looks_like_uri(raw: &str) -> bool {
    raw.as_bytes()
        .get(..5)
        .is_some_and(|p| p.eq_ignore_ascii_case(b"file:"))
}

/// Turn the input text into the absolute path to open.
pub(crate) fn requested_path(
    input: &RootInput,
    rules: &RootRules,
) -> Result<PathBuf, RefusalReason> {
    let raw = input.raw.as_str();
    if input.uri_only || looks_like_uri(raw) {
        return Ok(parse_file_uri(raw)?);
    }
    if raw.is_empty() {
        return Err(RefusalReason::Uri(super::UriError::Empty));
    }
    if raw.contains('\0') {
        return Err(RefusalReason::Uri(super::UriError::Nul(0)));
    }
    let expanded = if raw == "~" || raw.starts_with("~/") {
        let home = rules.home.as_ref().ok_or(RefusalReason::NoHome)?;
        let rest = raw[1..].trim_start_matches('/');
        if rest.is_empty() {
            home.clone()
        } else {
            home.join(rest)
        }
    } else {
        PathBuf::from(raw)
    };
    if expanded.is_absolute() {
        Ok(expanded)
    } else {
        match &rules.cwd {
            Some(cwd) => Ok(cwd.join(expanded)),
            None => Err(RefusalReason::Relative),
        }
    }
}

/// Open the root once, following symlinks, and classify it.
fn open_root(path: &Path) -> Result<(OwnedFd, RootKind), RefusalReason> {
    let fd = rustix::fs::open(path, OFlags::PATH | OFlags::CLOEXEC, Mode::empty()).map_err(
        |e| match e {
            Errno::NOENT => {
                // Tell a dangling symlink from a plain missing path.
                match rustix::fs::lstat(path) {
                    Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::Symlink => {
                        RefusalReason::Dangling(path.to_path_buf())
                    }
                    _ => RefusalReason::NotFound(path.to_path_buf()),
                }
            }
            Errno::LOOP => RefusalReason::SymlinkLoop(path.to_path_buf()),
            Errno::NOTDIR => RefusalReason::NotADirectoryComponent(path.to_path_buf()),
            other => RefusalReason::Io {
                path: path.to_path_buf(),
                message: std::io::Error::from(other).to_string(),
            },
        },
    )?;
    let st = rustix::fs::fstat(&fd).map_err(|e| RefusalReason::Io {
        path: path.to_path_buf(),
        message: std::io::Error::from(e).to_string(),
    })?;
    let kind = match FileType::from_raw_mode(st.st_mode) {
        FileType::Directory => RootKind::Directory,
        FileType::RegularFile => RootKind::File,
        _ => return Err(RefusalReason::BadKind(path.to_path_buf())),
    };
    Ok((fd, kind))
}

/// The canonical path of an open descriptor, read back from
/// `/proc/self/fd`, and confirmed to name the same object.
fn canonical_path_of(fd: &OwnedFd, requested: &Path) -> Result<PathBuf, RefusalReason> {
    let io = |message: String| RefusalReason::Io {
        path: requested.to_path_buf(),
        message,
    };
    let link = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(fd));
    let path = match rustix::fs::readlink(link.as_str(), Vec::new()) {
        Ok(target) => PathBuf::from(OsString::from_vec(target.into_bytes())),
        // Without /proc, fall back to the path-based canonicalization; the
        // identity check below still ties it to the open handle.
        Err(_) => std::fs::canonicalize(requested).map_err(|e| io(e.to_string()))?,
    };
    let a = rustix::fs::fstat(fd).map_err(|e| io(std::io::Error::from(e).to_string()))?;
    let same = rustix::fs::stat(&path)
        .map(|b| a.st_dev == b.st_dev && a.st_ino == b.st_ino)
        .unwrap_or(false);
    if !path.is_absolute() || !same {
        return Err(RefusalReason::Changed {
            path: requested.to_path_buf(),
            now: path,
        });
    }
    Ok(path)
}

/// Apply the `/`, deny and ceiling rules to a canonical path.
/// Kernel interface filesystems, by `statfs` magic: never roots.
const KERNEL_FILESYSTEMS: &[(i64, &str)] = &[
    (0x9fa0, "procfs"),
    (0x6265_6572, "sysfs"),
    (0x1cd1, "devpts"),
    (0x0027_e0eb, "cgroupfs"),
    (0x6367_7270, "cgroup2fs"),
    (0x6462_6720, "debugfs"),
    (0x7472_6163, "tracefs"),
    (0x7363_6673, "securityfs"),
    (0xcafe_4a11, "bpffs"),
    (0x6265_6570, "configfs"),
    (0xde5e_81e4, "efivarfs"),
    (0x6165_676c, "pstore"),
    (0x4249_4e4d, "binfmt_misc"),
    (0x6573_5543, "fusectl"),
    (0x1980_0202, "mqueue"),
    (0xf97c_ff8c, "selinuxfs"),
    (0x6e73_6673, "nsfs"),
    (0x9584_58f6, "hugetlbfs"),
];

/// Refuse a root on a kernel interface filesystem (checked on the open
/// handle) or under `/proc`, `/sys`, `/dev` (devtmpfs reports itself as a
/// tmpfs) or `/run`.
fn check_filesystem(fd: &OwnedFd, path: &Path) -> Result<(), RefusalReason> {
    let st = rustix::fs::fstatfs(fd).map_err(|e| RefusalReason::Io {
        path: path.to_path_buf(),
        message: std::io::Error::from(e).to_string(),
    })?;
    #[allow(clippy::unnecessary_cast)]
    let magic = st.f_type as i64;
    if let Some((_, name)) = KERNEL_FILESYSTEMS.iter().find(|(m, _)| *m == magic) {
        return Err(RefusalReason::KernelInterface {
            path: path.to_path_buf(),
            what: (*name).to_string(),
        });
    }
    for (dir, what) in [
        ("/proc", "procfs"),
        ("/sys", "sysfs"),
        ("/dev", "the device filesystem"),
    ] {
        if path.starts_with(dir) {
            return Err(RefusalReason::KernelInterface {
                path: path.to_path_buf(),
                what: what.to_string(),
            });
        }
    }
    if path.starts_with("/run") {
        return Err(RefusalReason::RunState(path.to_path_buf()));
    }
    Ok(())
}

fn check_rules(path: &Path, rules: &RootRules) -> Result<(), RefusalReason> {
    if path == Path::new("/") && !rules.allow_filesystem_root {
        return Err(RefusalReason::FilesystemRoot);
    }
    // The first deny rule one of whose names `hits`.
    let denied_by = |hits: &dyn Fn(&Path) -> bool| {
        rules
            .deny
            .iter()
            .find(|rule| rule.names().any(hits))
            .map(|rule| (rule.shown.clone(), rule.origin.clone()))
    };
    if let Some((shown, origin)) = denied_by(&|denied| super::within(path, denied)) {
        return Err(RefusalReason::InsideDenied { shown, origin });
    }
    if let Some((shown, origin)) = denied_by(&|denied| super::within(denied, path)) {
        return Err(RefusalReason::ContainsDenied { shown, origin });
    }
    if let Some(ceiling) = &rules.allow_under {
        let inside = ceiling
            .iter()
            .any(|c| c.names().any(|prefix| super::within(path, prefix)));
        if !inside {
            let shown: Vec<&str> = ceiling.iter().map(|c| c.shown.as_str()).collect();
            return Err(RefusalReason::OutsideCeiling {
                path: path.to_path_buf(),
                ceiling: if shown.is_empty() {
                    "empty: no roots allowed".to_string()
                } else {
                    shown.join(", ")
                },
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uri_detection_is_bytewise() {
        assert!(looks_like_uri("file:///x"));
        assert!(looks_like_uri("FiLe:x"));
        assert!(!looks_like_uri("file"));
        assert!(!looks_like_uri("/file:"));
        // A multi-byte character across byte 5 must not panic.
        assert!(!looks_like_uri("abcdé"));
        assert!(!looks_like_uri("fileé"));
        assert!(!looks_like_uri("é"));
    }
}
