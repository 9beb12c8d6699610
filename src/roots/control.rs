//! Control files in a root: version-control and editor metadata that tools
//! outside the sandbox run unasked (`git status` runs `.git/config`'s
//! `core.fsmonitor`; editors run workspace tasks and settings; `direnv`
//! loads `.envrc`). Landlock cannot make a subtree of a granted tree
//! read-only; the server's filesystem view can (see
//! [`crate::plan::Protected`]).
//!
//! Found through the root's capability handle (cap-std), never by path.

use std::path::{Path, PathBuf};

use serde::Serialize;

/// What a control path is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ControlKind {
    /// A `.git` directory.
    GitDir,
    /// A `.git` file (a worktree or submodule pointing at its git dir).
    GitFile,
    /// A `.hg` directory.
    Hg,
    /// A `.envrc` file (direnv).
    Envrc,
    /// A `.vscode` directory (tasks, settings, launch configurations).
    Vscode,
    /// An `.idea` directory (JetBrains run configurations).
    Idea,
}

impl ControlKind {
    /// The entry name.
    pub fn name(self) -> &'static str {
        match self {
            ControlKind::GitDir | ControlKind::GitFile => ".git",
            ControlKind::Hg => ".hg",
            ControlKind::Envrc => ".envrc",
            ControlKind::Vscode => ".vscode",
            ControlKind::Idea => ".idea",
        }
    }
}

/// A control path found in a root.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ControlPath {
    /// Absolute path.
    pub path: PathBuf,
    /// What it is (for a symlink, what its name says it is).
    pub kind: ControlKind,
    /// A symlink with that name: tools outside follow it (git takes a
    /// `.git` link to a directory for the repository), and no mount can
    /// keep a symlink as it is, so it cannot be made read-only.
    pub symlink: bool,
    /// For a `.git` or `.hg` directory: the names at its top (and for git
    /// `objects/info/alternates` and `objects/info/http-alternates` when
    /// present), as scanned. What the VCS does not write in normal work is
    /// kept read-only ([`git_writes`], [`hg_writes`]).
    pub inner: Vec<String>,
    /// For a `.git` or `.hg` directory: the (device, inode) of the very
    /// directory `inner` was read from. The view mounts it only if it finds
    /// that object at the path: one swapped in since would not have its
    /// entries protected.
    pub identity: Option<(u64, u64)>,
}

/// Whether git writes the entry `name` at the top of its directory in
/// normal work (commit, fetch, merge, rebase, cherry-pick, stash, bisect,
/// gc): the allow-list of what stays writable in a protected `.git`.
/// Everything else there is what git reads as configuration (`config`,
/// `config.worktree`), where it is redirected (`commondir`, `worktrees/`,
/// `modules/`, `objects/info/alternates`), what it runs (`hooks/`), or
/// what it never writes (`description`, `info/`, `branches/`).
pub fn git_writes(name: &str) -> bool {
    const NAMES: &[&str] = &[
        "objects",
        "refs",
        "logs",
        "index",
        "HEAD",
        "ORIG_HEAD",
        "FETCH_HEAD",
        "MERGE_HEAD",
        "MERGE_MSG",
        "MERGE_MODE",
        "MERGE_RR",
        "MERGE_AUTOSTASH",
        "AUTO_MERGE",
        "CHERRY_PICK_HEAD",
        "REVERT_HEAD",
        "REBASE_HEAD",
        "COMMIT_EDITMSG",
        "TAG_EDITMSG",
        "SQUASH_MSG",
        "NOTES_EDITMSG",
        "EDIT_DESCRIPTION",
        "packed-refs",
        "shallow",
        "sequencer",
        "rebase-merge",
        "rebase-apply",
        "rr-cache",
        "lost-found",
        "gc.pid",
        "gc.log",
        "gitk.cache",
    ];
    NAMES.contains(&name)
        || name.starts_with("BISECT_")
        || name.starts_with("sharedindex.")
        || name.starts_with("index.stash.")
        || (name.ends_with(".lock") && !name.starts_with("config"))
}

/// Whether Mercurial writes the entry `name` at the top of `.hg` in
/// normal work. `hgrc` (hooks, extensions), `sharedpath` (a redirect) and
/// `requires` stay read-only.
pub fn hg_writes(name: &str) -> bool {
    const NAMES: &[&str] = &[
        "store",
        "dirstate",
        "cache",
        "wcache",
        "bookmarks",
        "bookmarks.current",
        "branch",
        "last-message.txt",
        "wlock",
        "lock",
        "merge",
        "shelved",
        "strip-backup",
        "histedit-state",
        "rebasestate",
        "graftstate",
    ];
    NAMES.contains(&name) || name.starts_with("undo") || name.starts_with("journal")
}

/// The VCS directory `name` of `dir`, opened once without following a
/// symlink: the names at its top (`inner`) and its identity, both of that
/// very directory; `None` when it is no longer a directory there (a symlink
/// or something else was put in its place since its type was read).
fn open_vcs(
    dir: &cap_std::fs::Dir,
    name: &Path,
    kind: ControlKind,
) -> Option<(Vec<String>, (u64, u64))> {
    let fd = rustix::fs::openat(
        dir,
        name,
        rustix::fs::OFlags::RDONLY
            | rustix::fs::OFlags::DIRECTORY
            | rustix::fs::OFlags::NOFOLLOW
            | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )
    .ok()?;
    let st = rustix::fs::fstat(&fd).ok()?;
    let d = cap_std::fs::Dir::from_std_file(std::fs::File::from(fd));
    let mut out = Vec::new();
    if let Ok(entries) = d.entries() {
        for e in entries.flatten() {
            out.push(e.file_name().to_string_lossy().into_owned());
        }
    }
    if kind == ControlKind::GitDir {
        for alt in ["objects/info/alternates", "objects/info/http-alternates"] {
            if d.symlink_metadata(alt).is_ok() {
                out.push(alt.to_string());
            }
        }
    }
    out.sort();
    Some((out, (st.st_dev, st.st_ino)))
}

/// The control path `name` of `dir` (at `at`) whose type was read as
/// `is_dir`/`is_symlink`. A VCS directory is opened once for its entries
/// and identity; one that is no longer a directory by then is recorded as
/// a symlink (refused under `vcs = "read-only"`, as one found so).
fn control_path(
    dir: &cap_std::fs::Dir,
    at: &Path,
    name: &str,
    is_dir: bool,
    is_symlink: bool,
) -> Option<ControlPath> {
    let kind = kind_of(name, is_dir, is_symlink)?;
    let vcs = matches!(kind, ControlKind::GitDir | ControlKind::Hg) && !is_symlink;
    let opened = if vcs {
        open_vcs(dir, Path::new(name), kind)
    } else {
        None
    };
    let (inner, identity) = match opened {
        Some((inner, id)) => (inner, Some(id)),
        None => (Vec::new(), None),
    };
    Some(ControlPath {
        path: at.join(name),
        kind,
        symlink: is_symlink || (vcs && identity.is_none()),
        inner,
        identity,
    })
}

/// Most subdirectories of a root looked into (the scan is the root and its
/// direct subdirectories).
pub const MAX_SCANNED_DIRS: usize = 1024;

/// The control paths in the root `dir` (at `root`) and in its direct
/// subdirectories; and whether the scan stopped early (more than
/// [`MAX_SCANNED_DIRS`] subdirectories).
pub fn scan(dir: &cap_std::fs::Dir, root: &Path) -> (Vec<ControlPath>, bool) {
    let mut found = Vec::new();
    let Ok(entries) = dir.entries() else {
        return (found, false);
    };
    // One pass over the root's entries: its own metadata by name (the
    // entry's type, so a symlink named `.git` is not a repository), and
    // its subdirectories to look into.
    let mut truncated = false;
    let mut scanned = 0;
    for e in entries.flatten() {
        let Ok(ft) = e.file_type() else { continue };
        let name = e.file_name();
        if let Some(c) = name
            .to_str()
            .and_then(|n| control_path(dir, root, n, ft.is_dir(), ft.is_symlink()))
        {
            found.push(c);
            continue;
        }
        if !ft.is_dir() || truncated {
            continue;
        }
        scanned += 1;
        if scanned > MAX_SCANNED_DIRS {
            // Keep reading the root's own entries; look into no more
            // subdirectories.
            truncated = true;
            continue;
        }
        if let Ok(sub) = e.open_dir() {
            scan_one(&sub, &root.join(&name), &mut found);
        }
    }
    found.sort_by(|a, b| a.path.cmp(&b.path));
    (found, truncated)
}

/// What an entry is by its name and type (a symlink by its name alone).
fn kind_of(name: &str, is_dir: bool, is_symlink: bool) -> Option<ControlKind> {
    if is_symlink {
        return Some(match name {
            ".git" => ControlKind::GitDir,
            ".hg" => ControlKind::Hg,
            ".envrc" => ControlKind::Envrc,
            ".vscode" => ControlKind::Vscode,
            ".idea" => ControlKind::Idea,
            _ => return None,
        });
    }
    Some(match (name, is_dir) {
        (".git", true) => ControlKind::GitDir,
        (".git", false) => ControlKind::GitFile,
        (".hg", true) => ControlKind::Hg,
        (".envrc", false) => ControlKind::Envrc,
        (".vscode", true) => ControlKind::Vscode,
        (".idea", true) => ControlKind::Idea,
        _ => return None,
    })
}

fn scan_one(dir: &cap_std::fs::Dir, at: &Path, found: &mut Vec<ControlPath>) {
    for name in [".git", ".hg", ".envrc", ".vscode", ".idea"] {
        // Not following a symlink: it is recorded as one.
        let Ok(md) = dir.symlink_metadata(name) else {
            continue;
        };
        found.extend(control_path(dir, at, name, md.is_dir(), md.is_symlink()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vcs_directory_swapped_for_a_symlink_after_its_type_was_read_is_a_symlink() {
        // The type was read as a directory; by the time it is opened for
        // its entries a symlink is there: recorded as a symlink (refused),
        // never as a directory with no entries to protect.
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        std::fs::create_dir_all(r.join("elsewhere")).unwrap();
        std::os::unix::fs::symlink("elsewhere", r.join(".git")).unwrap();
        let dir = cap_std::fs::Dir::open_ambient_dir(r, cap_std::ambient_authority()).unwrap();
        let c = control_path(&dir, r, ".git", true, false).unwrap();
        assert!(
            c.symlink && c.inner.is_empty() && c.identity.is_none(),
            "{c:?}"
        );
        // The twin: a real one is listed, with the identity of what was
        // listed.
        std::fs::remove_file(r.join(".git")).unwrap();
        std::fs::create_dir_all(r.join(".git/hooks")).unwrap();
        let c = control_path(&dir, r, ".git", true, false).unwrap();
        let md = std::fs::metadata(r.join(".git")).unwrap();
        use std::os::unix::fs::MetadataExt;
        assert_eq!(c.identity, Some((md.dev(), md.ino())));
        assert!(!c.symlink && c.inner == ["hooks"], "{c:?}");
    }

    #[test]
    fn finds_metadata_in_the_root_and_its_subdirectories_only() {
        let t = tempfile::tempdir().unwrap();
        let r = t.path();
        std::fs::create_dir_all(r.join(".git/hooks")).unwrap();
        std::fs::write(r.join(".envrc"), "").unwrap();
        std::fs::create_dir_all(r.join("app/.vscode")).unwrap();
        std::fs::create_dir_all(r.join("wt")).unwrap();
        std::fs::write(r.join("wt/.git"), "gitdir: ../x").unwrap();
        std::fs::create_dir_all(r.join("deep/er/.git")).unwrap();
        std::fs::create_dir_all(r.join("linked")).unwrap();
        std::os::unix::fs::symlink("/tmp", r.join("linked/.idea")).unwrap();
        let dir = cap_std::fs::Dir::open_ambient_dir(r, cap_std::ambient_authority()).unwrap();
        let (found, truncated) = scan(&dir, r);
        assert!(!truncated);
        let got: Vec<(String, ControlKind, bool)> = found
            .iter()
            .map(|c| {
                (
                    c.path.strip_prefix(r).unwrap().display().to_string(),
                    c.kind,
                    c.symlink,
                )
            })
            .collect();
        assert_eq!(
            got,
            [
                (".envrc".to_string(), ControlKind::Envrc, false),
                (".git".to_string(), ControlKind::GitDir, false),
                ("app/.vscode".to_string(), ControlKind::Vscode, false),
                ("linked/.idea".to_string(), ControlKind::Idea, true),
                ("wt/.git".to_string(), ControlKind::GitFile, false),
            ]
        );
    }
}
