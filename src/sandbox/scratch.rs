//! The server's private scratch directory (`TMPDIR`).

use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

use super::SandboxError;

/// A directory only the server can use: mode 0700, a fresh name under the
/// system temporary directory, removed (with everything in it) when the
/// value is dropped.
#[derive(Debug)]
pub struct Scratch {
    path: PathBuf,
}

impl Scratch {
    /// Create a fresh scratch directory under `std::env::temp_dir()`.
    ///
    /// # Security
    ///
    /// The directory is created by rootfence (never reused: creation fails
    /// on an existing name, and a new random name is tried), with mode 0700
    /// set explicitly after creation.
    pub fn create() -> Result<Scratch, SandboxError> {
        let base = std::env::temp_dir();
        let base = if base.is_absolute() {
            base
        } else {
            PathBuf::from("/tmp")
        };
        let mut last = None;
        for _ in 0..16 {
            let path = base.join(format!(
                "rootfence-{}-{:016x}",
                std::process::id(),
                random_u64()
            ));
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => {
                    let scratch = Scratch { path };
                    std::fs::set_permissions(&scratch.path, std::fs::Permissions::from_mode(0o700))
                        .map_err(|source| SandboxError::Scratch {
                            dir: scratch.path.clone(),
                            source,
                        })?;
                    return Ok(scratch);
                }
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => last = Some(e),
                Err(source) => return Err(SandboxError::Scratch { dir: base, source }),
            }
        }
        Err(SandboxError::Scratch {
            dir: base,
            source: last.unwrap_or_else(|| std::io::Error::other("no free name")),
        })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Remove the directory and everything in it now.
    pub fn remove(self) -> std::io::Result<()> {
        let path = self.path.clone();
        std::mem::forget(self);
        remove(&path)
    }
}

fn remove(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_dir_all(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if let Err(e) = remove(&self.path) {
            tracing::warn!(
                "cannot remove the scratch directory {}: {e}; remove it by hand",
                self.path.display()
            );
        }
    }
}

fn random_u64() -> u64 {
    let mut buf = [0u8; 8];
    // SAFETY: getrandom writes at most `buf.len()` bytes into `buf`.
    let n = unsafe { libc::getrandom(buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n == 8 {
        u64::from_ne_bytes(buf)
    } else {
        // Uniqueness, not secrecy, is what matters (creation refuses an
        // existing name): fall back to the clock.
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    }
}
