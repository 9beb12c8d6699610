//! Which directories are too wide to be granted whole.
//!
//! Every rule that grants a directory because of what it holds (an install
//! tree, a project, a cache) asks here first: a directory shared by
//! everything the user runs (`/`, `/tmp`, the home directory), or one that
//! holds the user's own data (an ancestor of `~/.config`, `~/.local/share`,
//! `~/.cache`, `~/.local/state` or of the home directory), is never granted
//! by a rule. The rule then grants something narrower or nothing.

use std::path::{Path, PathBuf};

use super::HostEnv;

/// Directories shared by everything the user runs.
const SHARED: &[&str] = &[
    "/",
    "/tmp",
    "/var",
    "/var/tmp",
    "/dev/shm",
    "/run",
    "/home",
    "/root",
    "/srv",
    "/opt",
    "/mnt",
    "/media",
    "/usr/local/bin",
    "/usr/bin",
];

/// The user's data directories: `$XDG_CONFIG_HOME`, `$XDG_DATA_HOME`,
/// `$XDG_CACHE_HOME`, `$XDG_STATE_HOME` (or their defaults under the home
/// directory), canonical where they exist.
pub fn user_data_dirs(env: &HostEnv) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for (var, default) in [
        ("XDG_CONFIG_HOME", ".config"),
        ("XDG_DATA_HOME", ".local/share"),
        ("XDG_CACHE_HOME", ".cache"),
        ("XDG_STATE_HOME", ".local/state"),
    ] {
        if let Some(d) = env.xdg(var, default) {
            out.push(canonical_or(d));
        }
    }
    out
}

/// `p` canonical when it exists, else as given.
pub fn canonical_or(p: PathBuf) -> PathBuf {
    crate::canon::canonicalize(&p).unwrap_or(p)
}

/// Whether `dir` is one of the shared directories (as given or resolved),
/// or the home directory.
pub fn shared(dir: &Path, env: &HostEnv) -> bool {
    let named = |d: &Path| {
        SHARED.iter().any(|s| d == Path::new(s))
            || env
                .home
                .as_deref()
                .is_some_and(|h| d == h || crate::canon::canonicalize(h).is_ok_and(|c| c == d))
    };
    named(dir) || crate::canon::canonicalize(dir).is_ok_and(|c| named(&c))
}

/// Whether `dir` is too wide to be granted whole by a rule: shared, or an
/// ancestor of (or equal to) the home directory or one of the user's data
/// directories.
pub fn too_wide(dir: &Path, env: &HostEnv) -> bool {
    if shared(dir, env) {
        return true;
    }
    let dir = canonical_or(dir.to_path_buf());
    let home = env.home.clone().map(canonical_or);
    home.iter()
        .chain(user_data_dirs(env).iter())
        .any(|d| d.starts_with(&dir))
}

/// Whether `p` lies in one of the system trees every server reads
/// (`/usr`, `/bin`, `/lib`, ...), which no other rule needs to grant.
pub fn in_system_tree(p: &Path) -> bool {
    super::system::TREES.iter().any(|t| p.starts_with(t))
}
