//! Which install trees are toolchains, recognized by the toolchain's own
//! layout.
//!
//! A `PATH` entry grants the programs in it; the tree a program is
//! installed in is granted only when the files the toolchain itself puts
//! there say that it is one: a virtual environment's `pyvenv.cfg`, an
//! interpreter's library directory (`lib/python3.12`,
//! `lib/node_modules/npm`, `lib/ruby`), a compiler's (`lib/rustlib`,
//! `pkg/tool`), a Java runtime's `lib/jvm.cfg`; and the version managers'
//! own trees (pyenv's, rbenv's: `shims/` beside `versions/`). A directory
//! above a `bin/` that shows none of these (`~/go` with its sources, a
//! project, the home directory) is not an install tree, whatever it holds.
//!
//! Effectful: it looks for those files (a `stat` each, one listing of a
//! prefix's `lib/`), never reads one.

use std::path::{Path, PathBuf};

use super::exe::base_name;

/// Files (relative to a prefix) that mark it as a toolchain's install,
/// with what kind of toolchain each marks. `lib/pythonX.Y` is looked for
/// separately ([`python_lib`]).
const MARKERS: &[(&str, &str)] = &[
    ("lib/node_modules/npm", "node install"),
    ("lib/ruby", "Ruby install"),
    ("lib/rustlib", "Rust toolchain"),
    ("pkg/tool", "Go install"),
    ("lib/jvm.cfg", "Java runtime"),
];

/// Files that mark a project or a checkout: a prefix holding one is not
/// granted whole, whatever else it holds.
const PROJECT_MARKERS: &[&str] = &[
    ".git",
    ".hg",
    ".svn",
    ".env",
    "package.json",
    "pyproject.toml",
    "setup.py",
    "Cargo.toml",
    "go.mod",
    "deno.json",
];

/// A toolchain's install recognized above a `bin/` directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Install {
    /// A virtual environment (its `pyvenv.cfg`).
    Venv(PathBuf),
    /// An interpreter's or compiler's install prefix.
    Prefix {
        /// The prefix (the directory above `bin/`).
        dir: PathBuf,
        /// What it is (`Python install`, `node install`, ...).
        kind: &'static str,
        /// The library directories that made it one (`lib/python3.12`,
        /// `lib/node_modules`): what is granted when the prefix itself is
        /// too wide (`~/.local`) or also holds a project.
        parts: Vec<PathBuf>,
        /// Whether the prefix also holds a project's or checkout's marker
        /// (`.git`, `.env`, `package.json`, ...): then only `parts` are
        /// granted.
        project: bool,
    },
}

/// The toolchain install that `bin` (a directory holding programs) belongs
/// to: `bin`'s parent, when its layout shows one.
pub fn install_of(bin: &Path) -> Option<Install> {
    if !matches!(base_name(bin).as_str(), "bin" | "sbin") {
        return None;
    }
    let prefix = bin.parent()?;
    if prefix.join("pyvenv.cfg").is_file() {
        return Some(Install::Venv(prefix.to_path_buf()));
    }
    let mut kind = None;
    let mut parts = Vec::new();
    if let Some(lib) = python_lib(prefix) {
        kind = Some("Python install");
        parts.push(lib);
    }
    for (marker, what) in MARKERS {
        let m = prefix.join(marker);
        if m.exists() {
            kind.get_or_insert(what);
            if let Some(part) = part_of(prefix, marker) {
                parts.push(part);
            }
        }
    }
    let kind = kind?;
    let project = PROJECT_MARKERS
        .iter()
        .any(|m| std::fs::symlink_metadata(prefix.join(m)).is_ok());
    Some(Install::Prefix {
        dir: prefix.to_path_buf(),
        kind,
        parts,
        project,
    })
}

/// The library directory of a marker granted when its prefix is not
/// (`lib/node_modules` for `lib/node_modules/npm`); none for the markers
/// whose toolchain needs its whole prefix.
fn part_of(prefix: &Path, marker: &str) -> Option<PathBuf> {
    match marker {
        "lib/node_modules/npm" => Some(prefix.join("lib/node_modules")),
        "lib/ruby" | "lib/rustlib" => Some(prefix.join(marker)),
        _ => None,
    }
}

/// `prefix/lib/pythonX.Y` (or `python3`), the standard library or
/// site-packages of a Python installed in `prefix`.
fn python_lib(prefix: &Path) -> Option<PathBuf> {
    let rd = std::fs::read_dir(prefix.join("lib")).ok()?;
    rd.flatten()
        .find(|e| {
            e.file_name()
                .to_str()
                .and_then(|n| n.strip_prefix("python"))
                .is_some_and(|v| v.starts_with(|c: char| c.is_ascii_digit()))
                && e.file_type().is_ok_and(|t| t.is_dir())
        })
        .map(|e| e.path())
}

/// A version manager of the rbenv family (pyenv, rbenv, nodenv, ...):
/// its root holds `versions/` (the installs) beside `shims/` (scripts
/// that run `<manager> exec`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionManager {
    /// The manager's root (`~/.pyenv`).
    pub root: PathBuf,
}

impl VersionManager {
    /// The manager whose `shims/` or `bin/` directory `dir` is.
    pub fn of_path_dir(dir: &Path) -> Option<VersionManager> {
        if !matches!(base_name(dir).as_str(), "shims" | "bin") {
            return None;
        }
        let root = dir.parent()?;
        let ok = root.join("versions").is_dir() && root.join("shims").is_dir();
        ok.then(|| VersionManager {
            root: root.to_path_buf(),
        })
    }

    /// What its shims need to run `<manager> exec`, each with whether it
    /// is executed (else only read) and why: its commands (`libexec/`),
    /// its installs (`versions/`), the global version it reads
    /// (`version`), its hooks (`*.d/`) and its plugins (`plugins/`: more
    /// commands and hooks). Not the rest of the root (its sources, tests,
    /// documentation, a `.git`). Only what exists.
    pub fn needs(&self) -> Vec<(PathBuf, bool, &'static str)> {
        let r = &self.root;
        let mut out: Vec<_> = [
            (r.join("libexec"), true, "its commands"),
            (r.join("versions"), true, "its installs"),
            (r.join("version"), false, "its global version"),
            (r.join("plugins"), true, "its plugins"),
        ]
        .into_iter()
        .filter(|(p, _, _)| p.exists())
        .collect();
        for e in std::fs::read_dir(r).into_iter().flatten().flatten() {
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            if is_dir && e.file_name().to_str().is_some_and(|n| n.ends_with(".d")) {
                out.push((e.path(), true, "its hooks"));
            }
        }
        out
    }
}

/// rustup's home: `RUSTUP_HOME`, else `~/.rustup`.
pub fn rustup_home(env: &super::HostEnv) -> Option<PathBuf> {
    env.abs_var("RUSTUP_HOME")
        .or_else(|| env.home.as_ref().map(|h| h.join(".rustup")))
}

/// What rustup's proxies (`cargo`, `rustc`, ... in `~/.cargo/bin`, links
/// to `rustup`) need to run a toolchain: its settings (the default
/// toolchain, read) and its toolchains (executed). Not its downloads,
/// its temporary files or cargo's home beside it.
pub fn rustup_needs(home: &Path) -> [(PathBuf, bool, &'static str); 2] {
    [
        (home.join("settings.toml"), false, "rustup's settings"),
        (home.join("toolchains"), true, "rustup's toolchains"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp() -> (tempfile::TempDir, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(t.path()).unwrap();
        (t, base)
    }

    fn mkdir(p: &Path) {
        std::fs::create_dir_all(p).unwrap();
    }

    #[test]
    fn interpreters_and_compilers_are_recognized_by_their_library_directories() {
        let (_t, base) = tmp();
        for (dir, lib, kind) in [
            ("py", "lib/python3.12", "Python install"),
            ("node", "lib/node_modules/npm", "node install"),
            ("ruby", "lib/ruby/3.3.0", "Ruby install"),
            ("rust", "lib/rustlib", "Rust toolchain"),
            ("go", "pkg/tool/linux_amd64", "Go install"),
        ] {
            let prefix = base.join(dir);
            mkdir(&prefix.join("bin"));
            mkdir(&prefix.join(lib));
            match install_of(&prefix.join("bin")) {
                Some(Install::Prefix {
                    dir: d,
                    kind: k,
                    project: false,
                    ..
                }) => {
                    assert_eq!((d, k), (prefix.clone(), kind));
                }
                other => panic!("{dir}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_gopath_a_project_and_a_plain_directory_are_not_installs() {
        let (_t, base) = tmp();
        // GOPATH: programs, sources and the module cache.
        let gopath = base.join("go");
        mkdir(&gopath.join("bin"));
        mkdir(&gopath.join("src/x"));
        mkdir(&gopath.join("pkg/mod/cache"));
        assert_eq!(install_of(&gopath.join("bin")), None);
        let proj = base.join("proj");
        mkdir(&proj.join("bin"));
        std::fs::write(proj.join(".env"), "TOKEN=x").unwrap();
        assert_eq!(install_of(&proj.join("bin")), None);
        // Only a directory named bin leads to a prefix.
        mkdir(&base.join("py/tools"));
        mkdir(&base.join("py/lib/python3.12"));
        assert_eq!(install_of(&base.join("py/tools")), None);
    }

    #[test]
    fn a_prefix_holding_a_project_is_reduced_to_its_libraries() {
        let (_t, base) = tmp();
        let prefix = base.join("proj");
        mkdir(&prefix.join("bin"));
        mkdir(&prefix.join("lib/python3.12/site-packages"));
        mkdir(&prefix.join(".git"));
        let Some(Install::Prefix { project, parts, .. }) = install_of(&prefix.join("bin")) else {
            panic!("not recognized")
        };
        assert!(project);
        assert_eq!(parts, vec![prefix.join("lib/python3.12")]);
    }

    #[test]
    fn a_venv_is_recognized_by_its_pyvenv_cfg() {
        let (_t, base) = tmp();
        let venv = base.join(".venv");
        mkdir(&venv.join("bin"));
        std::fs::write(venv.join("pyvenv.cfg"), "home = /usr/bin\n").unwrap();
        assert_eq!(install_of(&venv.join("bin")), Some(Install::Venv(venv)));
    }

    #[test]
    fn a_version_manager_needs_its_commands_installs_and_hooks_not_its_root() {
        let (_t, base) = tmp();
        let root = base.join(".pyenv");
        for d in [
            "shims",
            "bin",
            "libexec",
            "versions/3.12.1/bin",
            "pyenv.d/exec",
            "plugins/pyenv-virtualenv/bin",
            "plugins/pyenv-virtualenv/etc/pyenv.d",
            "plugins/pyenv-virtualenv/.git",
            "src",
            ".git",
        ] {
            mkdir(&root.join(d));
        }
        std::fs::write(root.join("version"), "3.12.1\n").unwrap();
        let m = VersionManager::of_path_dir(&root.join("shims")).unwrap();
        assert_eq!(
            VersionManager::of_path_dir(&root.join("bin")),
            Some(m.clone())
        );
        assert_eq!(VersionManager::of_path_dir(&root.join("libexec")), None);
        let needs: Vec<PathBuf> = m.needs().into_iter().map(|(p, _, _)| p).collect();
        for want in ["libexec", "versions", "version", "pyenv.d", "plugins"] {
            assert!(needs.contains(&root.join(want)), "{want}: {needs:?}");
        }
        for not in [root.clone(), root.join("src"), root.join(".git")] {
            assert!(
                !needs.iter().any(|n| not.starts_with(n)),
                "{not:?}: {needs:?}"
            );
        }
        // A shims directory without versions beside it is no manager's.
        mkdir(&base.join("other/shims"));
        assert_eq!(VersionManager::of_path_dir(&base.join("other/shims")), None);
    }
}
