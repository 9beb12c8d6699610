//! A machine for the unit tests of `wrap`: a home at `/home/u`, `PATH`
//! `/srv/tools/bin:/usr/bin:/bin`, the files and directories a test
//! lists, and symlinks.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::Probe;
use crate::roots::{Access, RefusalReason};

/// The machine a test describes.
pub struct FakeProbe {
    /// Existing directories.
    pub dirs: BTreeSet<PathBuf>,
    /// Existing files.
    pub files: BTreeSet<PathBuf>,
    /// Symlinks: path to target (both absolute).
    pub links: BTreeMap<PathBuf, PathBuf>,
}

impl FakeProbe {
    /// The home, `/etc/ssl/certs` with a bundle, nothing else.
    pub fn new() -> FakeProbe {
        let dirs = [
            "/",
            "/home",
            "/home/u",
            "/etc",
            "/etc/ssl",
            "/etc/ssl/certs",
        ]
        .into_iter()
        .map(PathBuf::from)
        .collect();
        let files = ["/etc/ssl/certs/ca-certificates.crt"]
            .into_iter()
            .map(PathBuf::from)
            .collect();
        FakeProbe {
            dirs,
            files,
            links: BTreeMap::new(),
        }
    }

    /// Add a directory (and its ancestors).
    pub fn dir(&mut self, p: &str) -> &mut Self {
        for a in Path::new(p).ancestors() {
            self.dirs.insert(a.to_path_buf());
        }
        self
    }

    /// Add a file (and its directory).
    pub fn file(&mut self, p: &str) -> &mut Self {
        if let Some(d) = Path::new(p).parent().and_then(Path::to_str) {
            self.dir(d);
        }
        self.files.insert(PathBuf::from(p));
        self
    }
}

impl Probe for FakeProbe {
    fn is_dir(&self, path: &Path) -> bool {
        self.dirs
            .contains(&self.canonical(path).unwrap_or_default())
    }

    fn exists(&self, path: &Path) -> bool {
        let c = self.canonical(path).unwrap_or_default();
        self.dirs.contains(&c) || self.files.contains(&c)
    }

    fn home(&self) -> Option<PathBuf> {
        Some(PathBuf::from("/home/u"))
    }

    fn path_dirs(&self) -> Vec<PathBuf> {
        ["/srv/tools/bin", "/usr/bin", "/bin"]
            .into_iter()
            .map(PathBuf::from)
            .collect()
    }

    fn canonical(&self, path: &Path) -> Option<PathBuf> {
        let p = super::place::normal(path);
        for (link, target) in &self.links {
            if let Ok(rest) = p.strip_prefix(link) {
                return Some(super::place::normal(&target.join(rest)));
            }
        }
        Some(p)
    }

    fn root_refusal(
        &self,
        _dir: &Path,
        _policy: Option<&str>,
        _access: Access,
    ) -> Option<RefusalReason> {
        None
    }

    fn is_code(&self, _path: &Path) -> bool {
        false
    }
}
