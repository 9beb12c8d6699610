//! The roots engine: root URIs and paths in, canonical roots (or precise
//! refusals) out.
//!
//! A root arrives from an MCP host (a `file://` URI and an optional name),
//! from the command line (`--root` / `--ro-root`: a path or a `file://` URI)
//! or from a policy file. `resolve` validates it, opens it once and keeps
//! the open handle: every later stage (the plan, the Landlock ruleset,
//! rootfence's own file operations) rules on that handle, never on the path
//! string again. [`merge`] folds duplicates and nested roots together
//! deterministically.
//!
//! Merging rule: roots are sorted by canonical path. A root whose rights are
//! a subset of an enclosing root's rights is merged into the enclosing root
//! (a read-only root inside a read-write root adds nothing: the outer tree
//! stays read-write). A root with more rights than its enclosing root (a
//! read-write root inside a read-only one) is kept. Exact duplicates keep the
//! widest access and the first name given.

pub mod control;
pub mod planted;
mod resolve;
mod uri;

pub(crate) use resolve::looks_like_uri;
pub use resolve::{RootHandle, resolve, resolve_all};
pub use uri::{MAX_URI_LEN, UriError, parse_file_uri, path_to_uri};

use std::fmt;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// What a root lets the server do inside it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Access {
    /// Read only.
    ReadOnly,
    /// Read and write.
    ReadWrite,
}

impl Access {
    /// Whether every right of `self` is also a right of `other`.
    pub fn is_covered_by(self, other: Access) -> bool {
        self <= other
    }
}

impl fmt::Display for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Access::ReadOnly => "read-only",
            Access::ReadWrite => "read-write",
        })
    }
}

/// Whether a root is a directory tree or a single regular file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RootKind {
    /// A directory and everything beneath it.
    Directory,
    /// One regular file.
    File,
}

/// Where a root came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RootSource {
    /// The MCP host, over `roots/list`.
    Host,
    /// `--root` / `--ro-root` on rootfence's command line.
    CommandLine,
    /// A static root listed in the policy file.
    Policy,
}

impl fmt::Display for RootSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RootSource::Host => "host",
            RootSource::CommandLine => "command line",
            RootSource::Policy => "policy",
        })
    }
}

/// A root as given, before validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RootInput {
    /// The text as given: a URI, or (command line and policy only) a path.
    pub raw: String,
    /// Whether `raw` must be a URI (host roots) or may be a path.
    pub uri_only: bool,
    /// Display name offered with the root, if any.
    pub name: Option<String>,
    /// Requested access.
    pub access: Access,
    /// Where it came from.
    pub source: RootSource,
}

/// The places `inputs` asked for writing name, canonical, as far as they
/// can be read now (a hint for what is found before roots are resolved:
/// never a grant), each read as the resolver reads it (`~` as `home`, a
/// relative path from the working directory, a `file:` URI in any case).
pub fn writable_paths(inputs: &[RootInput], home: Option<&Path>) -> Vec<PathBuf> {
    let rules = RootRules {
        allow_under: None,
        deny: Vec::new(),
        allow_filesystem_root: true,
        sources: Vec::new(),
        home: home.map(Path::to_path_buf),
        cwd: std::env::current_dir().ok(),
    };
    inputs
        .iter()
        .filter(|i| i.access == Access::ReadWrite)
        .filter_map(|i| resolve::requested_path(i, &rules).ok())
        .filter_map(|p| crate::canon::canonicalize(&p).ok())
        .collect()
}

impl RootInput {
    /// A root announced by the MCP host (`roots/list` entry).
    pub fn host(uri: impl Into<String>, name: Option<String>, access: Access) -> Self {
        RootInput {
            raw: uri.into(),
            uri_only: true,
            name,
            access,
            source: RootSource::Host,
        }
    }

    /// A root from the command line: a path (absolute, relative or `~/...`)
    /// or a `file://` URI.
    pub fn command_line(arg: impl Into<String>, access: Access) -> Self {
        RootInput {
            raw: arg.into(),
            uri_only: false,
            name: None,
            access,
            source: RootSource::CommandLine,
        }
    }

    /// A static root from a policy file (path or URI, `~` expanded).
    pub fn policy(path: impl Into<String>, name: Option<String>, access: Access) -> Self {
        RootInput {
            raw: path.into(),
            uri_only: false,
            name,
            access,
            source: RootSource::Policy,
        }
    }
}

/// A validated root: what is enforced and what the server is told.
#[derive(Debug, Clone)]
pub struct CanonicalRoot {
    /// Canonical absolute path (symlinks resolved, from the open handle).
    pub path: PathBuf,
    /// Canonical `file:///` URI of `path`; round-trips through the parser.
    pub uri: String,
    /// Display name: the host's name, or the last path component.
    pub name: String,
    /// Granted access.
    pub access: Access,
    /// Directory or regular file.
    pub kind: RootKind,
    /// Where the root came from.
    pub source: RootSource,
    /// The input text it was resolved from.
    pub input: String,
    /// The handle opened when the root was resolved.
    pub handle: RootHandle,
    /// Version-control and editor metadata found in it (see
    /// [`control`]), and whether the scan stopped early.
    pub control: (Vec<control::ControlPath>, bool),
}

impl CanonicalRoot {
    /// Whether `self` lies inside (or is) `other`, component-wise: `/r_evil`
    /// is not inside `/r`.
    pub fn is_within(&self, other: &CanonicalRoot) -> bool {
        self.path.starts_with(&other.path)
            && (self.path == other.path || other.kind == RootKind::Directory)
    }
}

/// Whether `path` is `base` or lies beneath it, component-wise (`/r_evil`
/// is not beneath `/r`): `Path::starts_with`, with a byte comparison for
/// the normalized absolute paths rootfence works with (no `//`, no `.`
/// component, no trailing `/`), which are compared by the thousand when a
/// plan is built.
pub fn within(path: &Path, base: &Path) -> bool {
    within_known(Known::new(path), Known::new(base))
}

/// A path with whether it is in normal form known ([`is_normal`]), for
/// comparing it with [`within_known`] many times over without looking at
/// its form each time.
#[derive(Debug, Clone, Copy)]
pub struct Known<'a> {
    path: &'a Path,
    normal: bool,
}

impl<'a> Known<'a> {
    /// `path`, its form looked at once.
    pub fn new(path: &'a Path) -> Known<'a> {
        use std::os::unix::ffi::OsStrExt;
        Known {
            path,
            normal: is_normal(path.as_os_str().as_bytes()),
        }
    }

    /// The path.
    pub fn path(self) -> &'a Path {
        self.path
    }
}

/// [`within`] of two paths whose form is known.
pub fn within_known(path: Known<'_>, base: Known<'_>) -> bool {
    use std::os::unix::ffi::OsStrExt;
    if !(path.normal && base.normal) {
        return path.path.starts_with(base.path);
    }
    let (p, b) = (
        path.path.as_os_str().as_bytes(),
        base.path.as_os_str().as_bytes(),
    );
    b == b"/" || (p.starts_with(b) && (p.len() == b.len() || p[b.len()] == b'/'))
}

/// Whether `x` is an absolute path in normal form: `/`, or `/` and
/// components that are neither empty, `.` nor `..` (no trailing slash).
/// For such paths byte comparisons agree with component comparisons.
pub(crate) fn is_normal(x: &[u8]) -> bool {
    x == b"/"
        || (x.first() == Some(&b'/')
            && x[1..]
                .split(|&c| c == b'/')
                .all(|c| !c.is_empty() && c != b"." && c != b".."))
}

/// Where a path rule (ceiling or deny entry) was written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Origin {
    /// rootfence's built-in list.
    Builtin,
    /// A policy file, with the 1-based line of the entry.
    Policy {
        /// The policy file as given.
        file: PathBuf,
        /// 1-based line number.
        line: usize,
    },
    /// A loaded policy file itself (policy files are never readable).
    PolicyFile,
    /// The policy's audit file (rootfence writes it; the server never
    /// reaches it).
    AuditFile,
    /// Proposed by `rootfence learn` from a denial, for its next round.
    Learned,
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::Builtin => f.write_str("built-in"),
            Origin::Policy { file, line } => {
                write!(f, "policy {} line {}", file.display(), line)
            }
            Origin::PolicyFile => f.write_str("policy files are never exposed"),
            Origin::AuditFile => f.write_str("the audit file is never exposed"),
            Origin::Learned => f.write_str("proposed by rootfence learn"),
        }
    }
}

/// A path in a ceiling or deny list: how it was written, what it expands
/// to, what it resolves to, and where it came from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PathRule {
    /// As written (`~/.ssh`).
    pub shown: String,
    /// Expanded absolute path (`/home/a/.ssh`).
    pub path: PathBuf,
    /// Canonical path when it differs from `path` (a denied path that is a
    /// symlink, or lies under one, is denied under both names). For a path
    /// that does not exist (yet), its longest existing ancestor is
    /// canonicalized and the rest appended.
    pub resolved: Option<PathBuf>,
    /// Where the rule was written.
    pub origin: Origin,
}

impl PathRule {
    /// A rule for an absolute, already expanded path; resolves symlinks now.
    pub fn new(shown: impl Into<String>, path: PathBuf, origin: Origin) -> Self {
        let resolved = canonical_name(&path).filter(|r| *r != path);
        PathRule {
            shown: shown.into(),
            path,
            resolved,
            origin,
        }
    }

    /// Every name of this rule: the expanded path and, if different, its
    /// canonical target.
    pub fn names(&self) -> impl Iterator<Item = &Path> {
        std::iter::once(self.path.as_path()).chain(self.resolved.as_deref())
    }
}

/// The canonical name of `path`: canonicalize its longest existing ancestor
/// and append the components below it that do not exist. A denied
/// `~/.ssh` that does not exist yet, under a home directory reached through
/// a symlink, must still be denied under the home directory's real name.
fn canonical_name(path: &Path) -> Option<PathBuf> {
    let mut missing = Vec::new();
    let mut existing = path;
    let mut base = loop {
        match crate::canon::canonicalize(existing) {
            Ok(c) => break c,
            Err(_) => {
                missing.push(existing.file_name()?);
                existing = existing.parent()?;
            }
        }
    };
    base.extend(missing.iter().rev());
    Some(base)
}

/// The policy's rules for roots, in the form the engine needs.
#[derive(Debug, Clone, Default)]
pub struct RootRules {
    /// Ceiling: a root must lie under one of these. `None` means anywhere
    /// (the deny list still applies).
    pub allow_under: Option<Vec<PathRule>>,
    /// Paths no root may be inside or contain.
    pub deny: Vec<PathRule>,
    /// Whether `/` itself may be a root.
    pub allow_filesystem_root: bool,
    /// Which sources may contribute roots; empty means every source.
    pub sources: Vec<RootSource>,
    /// Home directory, for `~` in command-line and policy paths.
    pub home: Option<PathBuf>,
    /// Base for relative command-line paths.
    pub cwd: Option<PathBuf>,
}

/// Why a root was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RefusalReason {
    /// The URI parser refused it.
    #[error("{0}")]
    Uri(#[from] UriError),
    /// A relative path where only absolute ones are meaningful.
    #[error("relative path with no base directory")]
    Relative,
    /// `~` used but no home directory is known.
    #[error("`~` cannot be expanded: HOME is not set")]
    NoHome,
    /// Nothing exists at the path.
    #[error("{0} does not exist")]
    NotFound(PathBuf),
    /// The path is a symlink whose target does not exist.
    #[error("{0} is a dangling symlink")]
    Dangling(PathBuf),
    /// Symlinks loop.
    #[error("too many levels of symbolic links resolving {0}")]
    SymlinkLoop(PathBuf),
    /// A component of the path is not a directory.
    #[error("a component of {0} is not a directory")]
    NotADirectoryComponent(PathBuf),
    /// Neither a directory nor a regular file.
    #[error("{0} is neither a directory nor a regular file")]
    BadKind(PathBuf),
    /// Another I/O error.
    #[error("cannot open {path}: {message}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The OS error.
        message: String,
    },
    /// What was opened is no longer at the path (replaced or moved while
    /// it was resolved).
    #[error("cannot open {path}: it changed while being resolved (now {})", now.display())]
    Changed {
        /// The path.
        path: PathBuf,
        /// What the open handle's path reads as now.
        now: PathBuf,
    },
    /// On a kernel interface filesystem (procfs, sysfs, devices, cgroups,
    /// debugfs, ...) or under `/proc`, `/sys`, `/dev`.
    #[error(
        "{path} is on {what}, a kernel interface rather than a directory of files: roots there are refused (through it a server could change the kernel's settings, such as the core_pattern that runs at the next crash, or reach devices and other processes); choose a directory of files"
    )]
    KernelInterface {
        /// The canonical path.
        path: PathBuf,
        /// The filesystem.
        what: String,
    },
    /// A read-write root holding version-control or editor metadata, with
    /// `[roots] vcs = "refuse"`.
    #[error(
        "contains {found}, which tools outside the sandbox run unasked (git status runs .git/config's core.fsmonitor); a writable root may not hold them under [roots] vcs = \"refuse\" ({origin}): give it read-only, or choose a root without them"
    )]
    ControlFiles {
        /// What was found.
        found: String,
        /// Where the rule was written.
        origin: String,
    },
    /// A read-write root holding version-control or editor metadata
    /// through a symlink (`.git -> elsewhere`), with `[roots] vcs =
    /// "read-only"`: a symlink cannot be kept read-only, and tools outside
    /// follow it.
    #[error(
        "holds {link}, a symlink where tools outside the sandbox look for version-control or editor metadata (git takes a .git link to a directory for the repository): it cannot be kept read-only under [roots] vcs = \"read-only\" ({origin}), and the server could point it anywhere; give the root read-only (--ro-root), replace the link with the directory, or set [roots] vcs = \"warn\""
    )]
    ControlSymlink {
        /// The link.
        link: PathBuf,
        /// Where the rule was written.
        origin: String,
    },
    /// Under `/run`: sockets and state of running services.
    #[error(
        "{0} is under /run, the sockets and state of running services: roots there are refused; choose a directory of files"
    )]
    RunState(PathBuf),
    /// `/` as a root.
    #[error(
        "the filesystem root / is not allowed as a root (set roots.allow_filesystem_root = true in a policy to allow it)"
    )]
    FilesystemRoot,
    /// Inside a denied path.
    #[error("inside denied path {shown} ({origin})")]
    InsideDenied {
        /// As written.
        shown: String,
        /// Where.
        origin: Origin,
    },
    /// Contains a denied path.
    #[error(
        "contains denied path {shown} ({origin}); Landlock cannot carve a hole in a root, so choose a narrower root"
    )]
    ContainsDenied {
        /// As written.
        shown: String,
        /// Where.
        origin: Origin,
    },
    /// Not under any `allow_under` prefix.
    #[error("{path} is outside the policy ceiling (roots.allow_under: {ceiling})")]
    OutsideCeiling {
        /// The canonical path.
        path: PathBuf,
        /// The ceiling, as written.
        ceiling: String,
    },
    /// More roots than the policy's `roots.max_roots`.
    #[error("more than roots.max_roots = {0} roots; raise it in the policy or pass fewer roots")]
    TooMany(usize),
    /// The source may not contribute roots.
    #[error("roots from the {0} are not accepted by the policy (roots.sources)")]
    SourceNotAllowed(RootSource),
}

/// A refused root: what was given, where from, and why.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("root {input} refused: {reason}")]
pub struct Refusal {
    /// The input as given.
    pub input: String,
    /// Where it came from.
    pub from: RootSource,
    /// Why.
    pub reason: RefusalReason,
}

/// The result of [`merge`].
#[derive(Debug, Clone, Default)]
pub struct Merged {
    /// The roots to enforce, sorted by path.
    pub roots: Vec<CanonicalRoot>,
    /// Roots folded into another: (the root, the path it was merged into).
    pub folded: Vec<(CanonicalRoot, PathBuf)>,
}

/// Merge duplicate and nested roots deterministically (see the module docs).
pub fn merge(roots: Vec<CanonicalRoot>) -> Merged {
    // Sort by path, widest access first for equal paths, so the first of a
    // group of duplicates is the one kept. The sort is stable: among equal
    // paths and access, the first given wins. Each root remembers its input
    // position so that a kept duplicate can take the name of the first one
    // given even when that one had narrower access.
    let mut roots: Vec<(usize, CanonicalRoot)> = roots.into_iter().enumerate().collect();
    roots.sort_by(|(_, a), (_, b)| {
        a.path
            .as_os_str()
            .cmp(b.path.as_os_str())
            .then(b.access.cmp(&a.access))
    });
    let mut out = Merged::default();
    // Input position of the name each kept root carries.
    let mut named_by: Vec<usize> = Vec::new();
    // Index in `out.roots` of the kept root at each path.
    let mut kept_at: std::collections::HashMap<PathBuf, usize> = std::collections::HashMap::new();
    for (index, root) in roots {
        // The nearest kept root enclosing this one decides: look its
        // ancestors up (itself first), so merging stays linear in the number
        // of roots times their depth.
        let enclosing = root.path.ancestors().find_map(|a| {
            let &i = kept_at.get(a)?;
            let kept: &CanonicalRoot = &out.roots[i];
            (a == root.path || kept.kind == RootKind::Directory).then_some(i)
        });
        match enclosing {
            Some(i) if root.access.is_covered_by(out.roots[i].access) => {
                let outer = &mut out.roots[i];
                if outer.path == root.path && index < named_by[i] {
                    outer.name = root.name.clone();
                    named_by[i] = index;
                }
                let into = outer.path.clone();
                out.folded.push((root, into));
            }
            _ => {
                kept_at.entry(root.path.clone()).or_insert(out.roots.len());
                out.roots.push(root);
                named_by.push(index);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_denied_path_under_a_symlink_gets_its_canonical_name() {
        let tmp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        std::fs::create_dir(base.join("real")).unwrap();
        std::os::unix::fs::symlink("real", base.join("link")).unwrap();
        let rule = PathRule::new("~/.ssh", base.join("link/.ssh/keys"), Origin::Builtin);
        assert_eq!(rule.resolved, Some(base.join("real/.ssh/keys")));
        // No symlink on the way: one name only.
        let rule = PathRule::new("~/.ssh", base.join("real/.ssh"), Origin::Builtin);
        assert_eq!(rule.resolved, None);
    }

    /// Every spelling the resolver takes for a writable root counts as
    /// the place it names: `~`, a `file:` URI in any case, a link.
    #[test]
    fn a_writable_root_is_the_place_however_it_is_spelled() {
        let tmp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        std::fs::create_dir(base.join("proj")).unwrap();
        std::os::unix::fs::symlink("proj", base.join("link")).unwrap();
        let rw = |raw: String| RootInput::command_line(raw, Access::ReadWrite);
        let inputs = [
            rw("~/proj".into()),
            rw(format!("FILE://{}/proj", base.display())),
            rw(format!("File://{}/link", base.display())),
            RootInput::command_line(format!("{}/proj", base.display()), Access::ReadOnly),
        ];
        assert_eq!(
            writable_paths(&inputs, Some(&base)),
            vec![base.join("proj"); 3]
        );
    }
}

#[cfg(test)]
mod within_tests {
    use super::within;
    use std::path::Path;

    #[test]
    fn agrees_with_path_starts_with() {
        let paths = [
            "/", "/a", "/a/b", "/ab", "/a/b/c", "/a/.x", "/a/.x/y", "/a/.", "/a//b", "/a/b/",
            "/ab/c", "/a.b", "relative", "/a/../b", "/.ssh", "/a/..b",
        ];
        for p in paths {
            for b in paths {
                assert_eq!(
                    within(Path::new(p), Path::new(b)),
                    Path::new(p).starts_with(b),
                    "{p} within {b}"
                );
                assert_eq!(
                    super::within_known(
                        super::Known::new(Path::new(p)),
                        super::Known::new(Path::new(b))
                    ),
                    Path::new(p).starts_with(b),
                    "{p} within {b}, forms known"
                );
            }
        }
    }
}
