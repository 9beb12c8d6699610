//! `wrap`'s window on the machine: the only way the pure rules of
//! `hostconfig` learn about the filesystem.

use std::path::{Path, PathBuf};

use crate::roots::{Access, RefusalReason};

/// What `wrap` needs to know about the machine: whether a path is a
/// directory, the home directory, the user's `PATH`.
pub trait Probe {
    /// Whether `path` is an existing directory.
    fn is_dir(&self, path: &Path) -> bool;
    /// Whether `path` exists (as anything).
    fn exists(&self, path: &Path) -> bool;
    /// The home directory, for `~/...` and `${userHome}`.
    fn home(&self) -> Option<PathBuf>;
    /// The directories of the user's `PATH`, in order.
    fn path_dirs(&self) -> Vec<PathBuf>;
    /// Where `path` leads: its canonical form, or (when it does not exist)
    /// its deepest existing ancestor's with the rest appended.
    fn canonical(&self, path: &Path) -> Option<PathBuf>;
    /// Why `rootfence run` under `policy` (`None`: the built-in default)
    /// would refuse `path` as a root with `access`, if it would.
    fn root_refusal(
        &self,
        path: &Path,
        policy: Option<&str>,
        access: Access,
    ) -> Option<RefusalReason>;
    /// Whether the existing file `path` is code (a script or an
    /// executable), not data.
    fn is_code(&self, path: &Path) -> bool;
}
