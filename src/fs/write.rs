//! Changing files: `write_file`, `create_directory`, `move_file`, and the
//! one way file contents are replaced (also used by `edit_file`).
//!
//! # Security
//!
//! Every directory is opened beneath its root's handle, and the last step
//! of each change is a single plain name in such a directory: a new file
//! is created with `O_EXCL` (never through a link), contents replace the
//! old file by `rename` (which replaces a name, never follows it), a move
//! is one `renameat2(RENAME_NOREPLACE)` between two opened directories. A
//! link swapped in at any moment can redirect a step only to another place
//! beneath the root, or make it fail.

use std::ffi::OsStr;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use cap_std::fs::{Dir, OpenOptions, PermissionsExt};
use rustix::fs::RenameFlags;

use super::error::FsError;
use super::paths::Target;

/// The place a write lands: an open directory beneath the root and a name
/// in it.
struct Landing {
    dir: Dir,
    name: PathBuf,
}

/// Where writing to `t` lands: `t` itself, or, when its last component is
/// a link, the file the link resolves to beneath the root (a link that
/// leads out, or to nothing, is refused).
fn landing(t: &Target) -> Result<Landing, FsError> {
    let root = &t.root.dir;
    let rel: PathBuf = match root.symlink_metadata(&t.rel) {
        Ok(m) if m.is_symlink() => match root.canonicalize(&t.rel) {
            Ok(p) => p,
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                return Err(FsError::DanglingLink {
                    given: t.given.clone(),
                });
            }
            Err(e) => return Err(t.err("write")(e)),
        },
        _ => t.rel.clone(),
    };
    let (parent, name) = match (rel.parent(), rel.file_name()) {
        (Some(p), Some(n)) => (p, n),
        _ => {
            return Err(FsError::IsRoot {
                given: t.given.clone(),
                what: "writing a file in its place",
            });
        }
    };
    let parent = if parent.as_os_str().is_empty() {
        Path::new(".")
    } else {
        parent
    };
    let dir = root.open_dir(parent).map_err(t.err("write"))?;
    Ok(Landing {
        dir,
        name: PathBuf::from(name),
    })
}

/// A fresh name beside `name` for the new contents.
fn temp_name(name: &OsStr) -> PathBuf {
    let mut bytes = [0u8; 8];
    rustix::rand::getrandom(&mut bytes, rustix::rand::GetRandomFlags::empty()).ok();
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let mut n = name.to_os_string();
    n.push(format!(".{hex}.tmp"));
    PathBuf::from(n)
}

/// Replace the contents of `t` (or create it) with `content`: written to a
/// new file beside it, then renamed over it; an existing file's permission
/// bits are kept.
pub fn replace(t: &Target, content: &[u8]) -> Result<(), FsError> {
    t.writable()?;
    let land = landing(t)?;
    let old_mode = match land.dir.symlink_metadata(&land.name) {
        Ok(m) if m.is_dir() => {
            return Err(FsError::Io {
                op: "write",
                given: t.given.clone(),
                source: io::Error::from(io::ErrorKind::IsADirectory),
            });
        }
        Ok(m) => Some(m.permissions().mode() & 0o7777),
        Err(_) => None,
    };
    let tmp = temp_name(land.name.as_os_str());
    let written = (|| -> io::Result<()> {
        let mut f = land
            .dir
            .open_with(&tmp, OpenOptions::new().write(true).create_new(true))?;
        f.write_all(content)?;
        if let Some(mode) = old_mode {
            f.set_permissions(cap_std::fs::Permissions::from_mode(mode))?;
        }
        f.sync_data()?;
        land.dir.rename(&tmp, &land.dir, &land.name)
    })();
    if let Err(e) = written {
        let _ = land.dir.remove_file(&tmp);
        return Err(t.err("write")(e));
    }
    Ok(())
}

/// `create_directory`: the directory and its missing parents.
pub fn create_dir(t: &Target) -> Result<(), FsError> {
    t.writable()?;
    if t.rel.as_os_str().is_empty() {
        return Ok(());
    }
    t.root
        .dir
        .create_dir_all(&t.rel)
        .map_err(t.err("create directory"))
}

/// `move_file`: the entry `from` names (a link moves as a link) to `to`,
/// refused when `to` exists.
pub fn move_entry(from: &Target, to: &Target) -> Result<(), FsError> {
    from.writable()?;
    to.writable()?;
    let Some((from_parent, from_name)) = from.split() else {
        return Err(FsError::IsRoot {
            given: from.given.clone(),
            what: "moving it",
        });
    };
    let Some((to_parent, to_name)) = to.split() else {
        return Err(FsError::DestinationExists {
            given: to.given.clone(),
        });
    };
    let dot = |p: &Path| -> PathBuf {
        if p.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            p.to_path_buf()
        }
    };
    let src = from
        .root
        .dir
        .open_dir(dot(from_parent))
        .map_err(from.err("move"))?;
    let dst = to
        .root
        .dir
        .open_dir(dot(to_parent))
        .map_err(to.err("move"))?;
    // Both names are single plain components (see `Roots::map`), looked up
    // in directories opened beneath their roots: renameat follows neither.
    match rustix::fs::renameat_with(&src, from_name, &dst, to_name, RenameFlags::NOREPLACE) {
        Ok(()) => Ok(()),
        Err(rustix::io::Errno::EXIST) => Err(FsError::DestinationExists {
            given: to.given.clone(),
        }),
        Err(rustix::io::Errno::INVAL) | Err(rustix::io::Errno::NOSYS) => {
            // A filesystem without RENAME_NOREPLACE: check, then rename.
            if dst.symlink_metadata(to_name).is_ok() {
                return Err(FsError::DestinationExists {
                    given: to.given.clone(),
                });
            }
            rustix::fs::renameat(&src, from_name, &dst, to_name)
                .map_err(|e| from.err("move")(io::Error::from(e)))
        }
        Err(e) => Err(from.err("move")(io::Error::from(e))),
    }
}
