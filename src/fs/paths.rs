//! The model's view of paths, mapped onto open root handles.
//!
//! A path a model gives is absolute (under a root, as the reference server
//! expects) or relative (to a root). It is read **lexically**: `~`
//! expanded, `.` dropped, `..` taken off the path text, never by asking the
//! filesystem. The result names one root and a path relative to it made of
//! plain names only. Every operation then resolves that relative path
//! beneath the root's open directory handle (cap-std: `openat2` with
//! `RESOLVE_BENEATH` where the kernel has it, component by component
//! otherwise), so no path string is ever resolved from `/`, and a symlink
//! that leads out (absolute, or `..` above the root) is refused by the
//! resolution itself.

use std::path::{Component, Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::Dir;

use super::error::FsError;

/// One allowed directory, held open.
#[derive(Debug)]
pub struct Root {
    /// The directory's absolute path as announced to the model (symlinks in
    /// it resolved when it was opened).
    pub path: PathBuf,
    /// Other absolute spellings that mean this root (the path as given,
    /// when it differed from `path`), matched like `path`.
    pub aliases: Vec<PathBuf>,
    /// The open handle every operation is resolved beneath.
    pub dir: Dir,
    /// Whether every write under it is refused.
    pub read_only: bool,
}

/// Why a root could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum RootError {
    /// Not an absolute path, or not a `file://` URI this parser accepts.
    #[error("root {given}: {why}")]
    Invalid {
        /// The root as given.
        given: String,
        /// Why.
        why: String,
    },
    /// The directory could not be opened.
    #[error("root {given}: cannot open it as a directory: {source}")]
    Open {
        /// The root as given.
        given: String,
        /// The error.
        source: std::io::Error,
    },
}

impl Root {
    /// Open the directory `given` (a path: absolute, relative to the working
    /// directory, or `~/...`) as a root. This is the one place a path is
    /// resolved from `/`: the roots are the user's and the host's choice,
    /// never the model's.
    pub fn open(given: &str, read_only: bool, home: Option<&Path>) -> Result<Root, RootError> {
        let expanded = expand_home(given, home);
        let absolute = std::path::absolute(&expanded).map_err(|e| RootError::Open {
            given: given.to_string(),
            source: e,
        })?;
        let absolute = lexical(&absolute);
        let path = std::fs::canonicalize(&absolute).map_err(|e| RootError::Open {
            given: given.to_string(),
            source: e,
        })?;
        let dir =
            Dir::open_ambient_dir(&path, ambient_authority()).map_err(|e| RootError::Open {
                given: given.to_string(),
                source: e,
            })?;
        let aliases = if absolute != path {
            vec![absolute]
        } else {
            Vec::new()
        };
        Ok(Root {
            path,
            aliases,
            dir,
            read_only,
        })
    }

    /// Open a root a host announced (a `file://` URI).
    pub fn open_uri(uri: &str, read_only: bool) -> Result<Root, RootError> {
        let path = crate::roots::parse_file_uri(uri).map_err(|e| RootError::Invalid {
            given: uri.to_string(),
            why: e.to_string(),
        })?;
        Root::open(&path.to_string_lossy(), read_only, None)
    }

    /// The absolute path the model sees for `rel` under this root.
    pub fn shown(&self, rel: &Path) -> PathBuf {
        if rel.as_os_str().is_empty() {
            self.path.clone()
        } else {
            self.path.join(rel)
        }
    }

    fn spellings(&self) -> impl Iterator<Item = &PathBuf> {
        std::iter::once(&self.path).chain(self.aliases.iter())
    }
}

/// The set of roots a call is served with.
#[derive(Debug, Default)]
pub struct Roots {
    /// In the order they were given.
    pub list: Vec<Root>,
}

/// A path mapped onto a root.
#[derive(Debug)]
pub struct Target<'a> {
    /// The root.
    pub root: &'a Root,
    /// The path under it: plain names only, empty for the root itself.
    pub rel: PathBuf,
    /// The path as the caller gave it.
    pub given: String,
}

impl Target<'_> {
    /// `rel`, or `.` for the root itself (what cap-std takes).
    pub fn rel_or_dot(&self) -> &Path {
        if self.rel.as_os_str().is_empty() {
            Path::new(".")
        } else {
            &self.rel
        }
    }

    /// The absolute path the model sees.
    pub fn shown(&self) -> PathBuf {
        self.root.shown(&self.rel)
    }

    /// Refuse when the root is read-only.
    pub fn writable(&self) -> Result<(), FsError> {
        if self.root.read_only {
            return Err(FsError::ReadOnly {
                given: self.given.clone(),
                root: self.root.path.clone(),
            });
        }
        Ok(())
    }

    /// The parent (relative, empty for the root) and the last name; `None`
    /// for the root itself.
    pub fn split(&self) -> Option<(&Path, &std::ffi::OsStr)> {
        let name = self.rel.file_name()?;
        Some((self.rel.parent().unwrap_or(Path::new("")), name))
    }

    /// An I/O error of `op` on this target (escapes named as such).
    pub fn err(&self, op: &'static str) -> impl FnOnce(std::io::Error) -> FsError + '_ {
        move |e| FsError::io(op, &self.given, &self.root.path, e)
    }
}

impl Roots {
    /// Whether there is no root.
    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }

    /// The roots as the reference server lists them: comma-separated.
    pub fn joined(&self) -> String {
        self.list
            .iter()
            .map(|r| r.path.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Map a path the model gave onto a root, lexically.
    ///
    /// # Security
    ///
    /// The result's `rel` holds only plain names: no `..`, no root, no
    /// `.`. It names a place beneath the root only as far as the text goes;
    /// what the names are on disk (symlinks included) is for the
    /// operations to resolve beneath the root's handle.
    pub fn map(&self, given: &str, home: Option<&Path>) -> Result<Target<'_>, FsError> {
        if self.list.is_empty() {
            return Err(FsError::NoRoots);
        }
        if given.contains('\0') {
            return Err(FsError::BadPath {
                given: given.to_string(),
                why: "it contains a NUL byte",
            });
        }
        let expanded = expand_home(given, home);
        if expanded.is_absolute() {
            let abs = lexical(&expanded);
            return match self.find(&abs) {
                Some((root, rel)) => Ok(Target {
                    root,
                    rel,
                    given: given.to_string(),
                }),
                None => Err(FsError::Outside {
                    given: given.to_string(),
                    resolved: abs,
                    roots: self.joined(),
                }),
            };
        }
        // Relative: against each root in turn, the first it stays inside.
        for root in &self.list {
            let abs = lexical(&root.path.join(&expanded));
            if let Some(rel) = beneath(&abs, &root.path) {
                return Ok(Target {
                    root,
                    rel,
                    given: given.to_string(),
                });
            }
        }
        let shown = lexical(&self.list[0].path.join(&expanded));
        Err(FsError::Outside {
            given: given.to_string(),
            resolved: shown,
            roots: self.joined(),
        })
    }

    /// The root (longest match first) whose path `abs` lies in.
    fn find(&self, abs: &Path) -> Option<(&Root, PathBuf)> {
        let mut best: Option<(usize, &Root, PathBuf)> = None;
        for root in &self.list {
            for spelling in root.spellings() {
                if let Some(rel) = beneath(abs, spelling) {
                    let depth = spelling.components().count();
                    if best.as_ref().is_none_or(|(d, _, _)| depth > *d) {
                        best = Some((depth, root, rel));
                    }
                }
            }
        }
        best.map(|(_, root, rel)| (root, rel))
    }
}

/// `abs` relative to `base`, component-wise (`/r-evil` is not under `/r`).
fn beneath(abs: &Path, base: &Path) -> Option<PathBuf> {
    abs.strip_prefix(base).ok().map(Path::to_path_buf)
}

/// `~` and `~/...` with the home directory, as the reference server does.
fn expand_home(given: &str, home: Option<&Path>) -> PathBuf {
    match home {
        Some(h) if given == "~" => h.to_path_buf(),
        Some(h) if given.starts_with("~/") => h.join(&given[2..]),
        _ => PathBuf::from(given),
    }
}

/// An absolute path with `.` dropped and `..` taken off the text (never
/// above `/`), as `path.resolve` reads it.
pub fn lexical(p: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for c in p.components() {
        match c {
            Component::Prefix(_) | Component::RootDir | Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(n) => out.push(n),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roots(dirs: &[&Path]) -> Roots {
        Roots {
            list: dirs
                .iter()
                .map(|d| Root::open(&d.to_string_lossy(), false, None).expect("open root"))
                .collect(),
        }
    }

    #[test]
    fn lexical_reading() {
        assert_eq!(lexical(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
        assert_eq!(lexical(Path::new("/../../x")), PathBuf::from("/x"));
        assert_eq!(lexical(Path::new("/a/b/")), PathBuf::from("/a/b"));
    }

    #[test]
    fn mapping_is_lexical_and_component_wise() {
        let t = tempfile::tempdir().expect("tempdir");
        let base = std::fs::canonicalize(t.path()).expect("canonical");
        let r = base.join("r");
        std::fs::create_dir(&r).expect("mkdir");
        std::fs::create_dir(base.join("r-evil")).expect("mkdir");
        let rs = roots(&[&r]);
        let ok = rs
            .map(&format!("{}/a/../b", r.display()), None)
            .expect("inside");
        assert_eq!(ok.rel, PathBuf::from("b"));
        let rel = rs.map("x/y", None).expect("relative");
        assert_eq!(rel.rel, PathBuf::from("x/y"));
        let root_itself = rs.map(&r.display().to_string(), None).expect("root");
        assert!(root_itself.rel.as_os_str().is_empty());
        for outside in [
            format!("{}-evil/secret", r.display()),
            format!("{}/../r-evil/secret", r.display()),
            "../r-evil/secret".to_string(),
            "/etc/passwd".to_string(),
        ] {
            match rs.map(&outside, None) {
                Err(FsError::Outside { given, .. }) => assert_eq!(given, outside),
                other => panic!("{outside}: {other:?}"),
            }
        }
    }

    #[test]
    fn nul_and_no_roots_refused() {
        let t = tempfile::tempdir().expect("tempdir");
        let rs = roots(&[t.path()]);
        assert!(matches!(rs.map("a\0b", None), Err(FsError::BadPath { .. })));
        assert!(matches!(
            Roots::default().map("a", None),
            Err(FsError::NoRoots)
        ));
    }
}
