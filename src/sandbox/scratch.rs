//! The server's private scratch directory (`TMPDIR`).
//!
//! A scratch directory is removed when its server ends. A rootfence that
//! is killed (SIGKILL) cannot do that, so each rootfence also removes, once,
//! in the background, the scratch directories left by rootfences that are
//! gone: see [`sweep_stale`].

use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::SandboxError;

/// A directory only the server can use: mode 0700, a fresh name under the
/// system temporary directory, removed (with everything in it) when the
/// value is dropped. While the value lives, rootfence holds a lock on the
/// directory, which tells other rootfences it is in use.
#[derive(Debug)]
pub struct Scratch {
    path: PathBuf,
    /// The directory, open and locked (`flock`); the kernel releases the
    /// lock when this process ends, however it ends.
    _lock: std::fs::File,
}

/// Prefix of every scratch directory's name.
const PREFIX: &str = "rootfence-";

/// A scratch directory younger than this is never swept: it may be one
/// another rootfence has just created and not yet locked.
const SWEEP_MIN_AGE: Duration = Duration::from_secs(60);

impl Scratch {
    /// Create a fresh scratch directory under `std::env::temp_dir()`.
    ///
    /// # Security
    ///
    /// The directory is created by rootfence (never reused: creation fails
    /// on an existing name, and a new random name is tried), with mode 0700
    /// set explicitly after creation.
    pub fn create() -> Result<Scratch, SandboxError> {
        Scratch::create_in(&temp_base())
    }

    /// [`Scratch::create`] under `base`.
    pub fn create_in(base: &Path) -> Result<Scratch, SandboxError> {
        let base = base.to_path_buf();
        let mut last = None;
        for _ in 0..16 {
            let path = base.join(format!(
                "{PREFIX}{}-{:016x}",
                std::process::id(),
                random_u64()
            ));
            match std::fs::DirBuilder::new().mode(0o700).create(&path) {
                Ok(()) => {
                    let lock = match open_dir(&path).and_then(|d| lock(&d).map(|()| d)) {
                        Ok(d) => d,
                        Err(source) => {
                            let _ = std::fs::remove_dir(&path);
                            return Err(SandboxError::Scratch { dir: path, source });
                        }
                    };
                    let scratch = Scratch { path, _lock: lock };
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

    /// The directory, open (a new descriptor of the one rootfence made and
    /// locked, never found again by its path).
    pub fn handle(&self) -> std::io::Result<std::os::fd::OwnedFd> {
        self._lock.try_clone().map(std::os::fd::OwnedFd::from)
    }

    /// Remove the directory and everything in it now.
    pub fn remove(self) -> std::io::Result<()> {
        let path = self.path.clone();
        std::mem::forget(self);
        remove(&path)
    }
}

/// The system temporary directory (`/tmp` if `TMPDIR` is not absolute).
pub(crate) fn temp_base() -> PathBuf {
    let base = std::env::temp_dir();
    if base.is_absolute() {
        base
    } else {
        PathBuf::from("/tmp")
    }
}

/// Open a directory (not through a symbolic link), close-on-exec.
fn open_dir(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
        .open(path)
}

/// Take the directory's lock without waiting.
fn lock(dir: &std::fs::File) -> std::io::Result<()> {
    rustix::fs::flock(
        dir.as_fd(),
        rustix::fs::FlockOperation::NonBlockingLockExclusive,
    )
    .map_err(std::io::Error::from)
}

/// Remove, once per process and in the background, the scratch
/// directories that rootfences which are gone (killed before they could
/// clean up) left in `base`, where this one makes its own (never a place
/// a server may write).
pub fn sweep_stale(base: &Path) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let base = base.to_path_buf();
        let spawned = std::thread::Builder::new()
            .name("scratch-sweep".into())
            .spawn(move || {
                let n = sweep_in(&base);
                if n > 0 {
                    tracing::info!(
                        "removed {n} scratch directories left by rootfences that were killed"
                    );
                }
            });
        if let Err(e) = spawned {
            tracing::debug!("no sweep of old scratch directories: {e}");
        }
    });
}

/// Remove the stale scratch directories under `base`; returns how many.
///
/// # Security
///
/// A directory is removed only if all of these hold: its name is exactly
/// a scratch directory's (`rootfence-PID-16 hex digits`); it is a real
/// directory (not a symbolic link) owned by this user; it is at least
/// [`SWEEP_MIN_AGE`] old; no process with its PID exists here; and its
/// lock can be taken (no live rootfence, in any PID namespace, holds it).
/// The removal does not follow symbolic links inside it.
pub fn sweep_in(base: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(base) else {
        return 0;
    };
    let me = rustix::process::geteuid().as_raw();
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(scratch_pid) else {
            continue;
        };
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        let old = meta
            .modified()
            .ok()
            .and_then(|m| m.elapsed().ok())
            .is_some_and(|age| age >= SWEEP_MIN_AGE);
        if !meta.is_dir() || meta.uid() != me || !old || alive(pid) {
            continue;
        }
        let Ok(dir) = open_dir(&path) else { continue };
        if lock(&dir).is_err() {
            continue;
        }
        match remove(&path) {
            Ok(()) => removed += 1,
            Err(e) => tracing::debug!("cannot remove {}: {e}", path.display()),
        }
    }
    removed
}

/// The PID in a scratch directory's name, if `name` is one.
fn scratch_pid(name: &str) -> Option<i32> {
    let (pid, suffix) = name.strip_prefix(PREFIX)?.split_once('-')?;
    let hex = suffix.len() == 16
        && suffix
            .bytes()
            .all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f'));
    let digits = !pid.is_empty() && pid.bytes().all(|c| c.is_ascii_digit());
    if !(hex && digits) {
        return None;
    }
    pid.parse().ok()
}

/// Whether a process with this PID exists (in this PID namespace).
fn alive(pid: i32) -> bool {
    let Some(pid) = rustix::process::Pid::from_raw(pid) else {
        return false;
    };
    // EPERM: it exists, as another user's.
    !matches!(
        rustix::process::test_kill_process(pid),
        Err(rustix::io::Errno::SRCH)
    )
}

fn remove(path: &Path) -> std::io::Result<()> {
    match std::fs::remove_dir_all(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        // A directory the server made unwritable (Landlock does not rule
        // on modes): each given back to its owner, then removed.
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
            writable_again(path);
            std::fs::remove_dir_all(path)
        }
        other => other,
    }
}

/// Give each directory under `path` mode 0700, through the directory
/// itself opened without following a link (a link put in its place is
/// never followed).
fn writable_again(path: &Path) {
    let Ok(dir) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW)
        .open(path)
    else {
        return;
    };
    let _ = dir.set_permissions(std::fs::Permissions::from_mode(0o700));
    // Its entries through the open directory, not its path again.
    let here = PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd()));
    if let Ok(entries) = std::fs::read_dir(&here) {
        for e in entries.flatten() {
            if e.file_type().is_ok_and(|t| t.is_dir()) {
                writable_again(&here.join(e.file_name()));
            }
        }
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

/// A random number (for unique names).
pub(super) fn random_u64() -> u64 {
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::SystemTime;

    /// No process has this PID: it is above the kernel's `pid_max` limit.
    const GONE: &str = "999999999";

    fn age(path: &Path, secs: u64) {
        let when = SystemTime::now() - Duration::from_secs(secs);
        let since = when.duration_since(SystemTime::UNIX_EPOCH).unwrap();
        let at = rustix::fs::Timespec {
            tv_sec: since.as_secs() as i64,
            tv_nsec: 0,
        };
        let ts = rustix::fs::Timestamps {
            last_access: at,
            last_modification: at,
        };
        rustix::fs::utimensat(
            rustix::fs::CWD,
            path,
            &ts,
            rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
        )
        .unwrap();
    }

    fn scratch_like(base: &Path, pid: &str, suffix: &str, secs_old: u64) -> PathBuf {
        let d = base.join(format!("{PREFIX}{pid}-{suffix}"));
        std::fs::create_dir(&d).unwrap();
        std::fs::write(d.join("left-behind"), "data").unwrap();
        age(&d, secs_old);
        d
    }

    #[test]
    fn only_directories_of_gone_rootfences_are_swept() {
        let t = tempfile::tempdir().unwrap();
        let base = t.path();
        let stale = scratch_like(base, GONE, "0123456789abcdef", 120);
        let young = scratch_like(base, GONE, "1123456789abcdef", 0);
        let me = std::process::id().to_string();
        let mine = scratch_like(base, &me, "2123456789abcdef", 120);
        let locked = scratch_like(base, GONE, "3123456789abcdef", 120);
        let held = open_dir(&locked).unwrap();
        lock(&held).unwrap();
        let odd_names = [
            scratch_like(base, GONE, "0123456789ABCDEF", 120),
            scratch_like(base, GONE, "0123456789abcde", 120),
            scratch_like(base, "12a", "0123456789abcdef", 120),
        ];
        let victim = base.join("victim");
        std::fs::create_dir(&victim).unwrap();
        std::fs::write(victim.join("precious"), "keep").unwrap();
        let link = base.join(format!("{PREFIX}{GONE}-4123456789abcdef"));
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        age(&link, 120);
        let live = Scratch::create_in(base).unwrap();

        assert_eq!(sweep_in(base), 1);
        assert!(
            !stale.exists(),
            "a gone rootfence's old directory is removed"
        );
        for kept in [&young, &mine, &locked, live.path()] {
            assert!(kept.exists(), "{} was removed", kept.display());
        }
        for odd in &odd_names {
            assert!(odd.exists(), "{} was removed", odd.display());
        }
        assert!(victim.join("precious").exists());
        assert!(std::fs::symlink_metadata(&link).is_ok());

        // Once its holder is gone, the locked one goes too.
        drop(held);
        assert_eq!(sweep_in(base), 1);
        assert!(!locked.exists());
    }

    #[test]
    fn a_scratch_directory_is_locked_while_it_lives() {
        let t = tempfile::tempdir().unwrap();
        let s = Scratch::create_in(t.path()).unwrap();
        let other = open_dir(s.path()).unwrap();
        assert!(lock(&other).is_err(), "a second lock must fail");
        let path = s.path().to_path_buf();
        drop(s);
        assert!(!path.exists());
    }
}
