//! The server's own cgroup: where one can be had, the memory and the
//! processes of the server and of everything it starts are bounded
//! together, shared memory, memfds and the pages of its `tmpfs` included
//! (what the per-process limits of [`super::resources`] cannot see).
//!
//! Where rootfence makes one ([`place`]; found by trying, a probe cgroup
//! made and removed, and the place found remembered for the boot in this
//! machine's record, [`super::machine`]; see [`Remembered`]):
//!
//! - **cgroup v2** (the unified hierarchy, where it holds the `memory` and
//!   `pids` controllers): in the nearest ancestor of rootfence's own cgroup
//!   that holds no process (v2 keeps processes in leaves), when rootfence
//!   may write it. Root may write the whole hierarchy; a user only the
//!   subtree systemd delegates to its user manager
//!   (`user.slice/user-UID.slice/user@UID.service`), and only when
//!   rootfence runs inside it (a desktop session's applications,
//!   `systemd-run --user --scope`): moving a process needs the right to
//!   write the `cgroup.procs` of the common ancestor of where it is and
//!   where it goes;
//! - **cgroup v1** (the `memory` and `pids` hierarchies, for what v2 does
//!   not hold): in rootfence's own cgroup of each (v1 lets a cgroup hold
//!   processes and children), where rootfence may make one (root).
//!
//! Each launch makes `rootfence-PID-N` there ([`Cgroup::create`]) with the
//! memory limit (no swap beyond it) and `pids.max`, holding a lock on it
//! while it is in use. The child is in it before it does anything: on v2
//! `clone3` starts it there (`CLONE_INTO_CGROUP`), else it writes itself in
//! first of all (v1: its only thread, through `tasks`, which spares the
//! global lock and the RCU grace period, milliseconds, that moving a whole
//! process through `cgroup.procs` waits for). With namespaces the init
//! leaves the v1 cgroups the same way once every other process of the
//! namespace is gone; a v2 cgroup it leaves by exiting, and rootfence reaps
//! it before removing the cgroup. So the cgroup is empty when rootfence
//! learns that the server ended, and is removed then ([`Cgroup`]'s `Drop`,
//! which first kills anything left in it: without namespaces, what the
//! server started and left). Cgroups left by a rootfence that was killed
//! are removed by the next one ([`sweep_stale`]).

use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The controllers of a server's cgroup.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Controllers {
    /// `memory`: the memory of the server and everything it starts,
    /// together.
    pub memory: bool,
    /// `pids`: their processes and threads, together.
    pub pids: bool,
}

impl Controllers {
    /// Both.
    pub const BOTH: Controllers = Controllers {
        memory: true,
        pids: true,
    };

    /// Neither.
    pub const NONE: Controllers = Controllers {
        memory: false,
        pids: false,
    };

    fn any(self) -> bool {
        self.memory || self.pids
    }

    fn and(self, o: Controllers) -> Controllers {
        Controllers {
            memory: self.memory && o.memory,
            pids: self.pids && o.pids,
        }
    }

    fn without(self, o: Controllers) -> Controllers {
        Controllers {
            memory: self.memory && !o.memory,
            pids: self.pids && !o.pids,
        }
    }

    /// The names, for `cgroup.subtree_control` and messages.
    fn names(self) -> String {
        let mut v = Vec::new();
        if self.memory {
            v.push("memory");
        }
        if self.pids {
            v.push("pids");
        }
        v.join(" and ")
    }
}

/// What this process can get of cgroups for its servers, for `doctor`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CgroupSupport {
    /// The controllers a server's cgroup gets.
    pub controllers: Controllers,
    /// Where servers' cgroups are made.
    pub at: Vec<CgroupAt>,
    /// Why a controller cannot be had, when one cannot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// Where servers' cgroups are made in one hierarchy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct CgroupAt {
    /// cgroup v2 or v1.
    pub version: u8,
    /// The controllers they get there.
    pub controllers: Controllers,
    /// The directory they are made in.
    pub dir: PathBuf,
}

impl std::fmt::Display for CgroupAt {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} in {} (cgroup v{})",
            self.controllers.names(),
            self.dir.display(),
            self.version
        )
    }
}

/// One hierarchy servers' cgroups are made in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Hierarchy {
    /// The unified hierarchy (else a v1 one).
    v2: bool,
    /// The controllers a server's cgroup gets in it.
    controllers: Controllers,
    /// The directory servers' cgroups are made in.
    parent: PathBuf,
    /// The same as a cgroup path (as `/proc/PID/cgroup` names it).
    parent_cgroup: PathBuf,
    /// rootfence's own cgroup's directory, where a server's init goes
    /// back to.
    home: PathBuf,
}

/// Where this process makes its servers' cgroups.
#[derive(Debug, Default)]
pub struct Place {
    hierarchies: Vec<Hierarchy>,
    /// Why a controller cannot be had, one reason per hierarchy tried.
    why: Vec<NoHierarchy>,
    /// Taken from this boot's record, not probed by this process.
    remembered: bool,
}

/// Why servers' cgroups cannot be made in a hierarchy.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NoHierarchy {
    /// A v2 cgroup on the way up could not be read.
    #[error("cgroup v2: cannot read the cgroup {}", .0.display())]
    Unreadable(PathBuf),
    /// The v2 cgroup to make them in offers neither controller.
    #[error(
        "cgroup v2: the cgroup {} offers neither the memory nor the pids controller",
        .0.display()
    )]
    NoController(PathBuf),
    /// rootfence may not write the v2 cgroup to make them in.
    #[error(
        "cgroup v2: rootfence may not make cgroups in {} (a user may only in the subtree systemd delegates to its user manager, user@UID.service, and only when rootfence runs inside it, as a desktop session's applications and `systemd-run --user --scope` do)",
        .0.display()
    )]
    NotDelegated(PathBuf),
    /// Every v2 ancestor holds processes.
    #[error("cgroup v2: rootfence's cgroup has no ancestor to make cgroups in")]
    NoAncestor,
    /// The chosen v2 cgroup is not under the v2 mount.
    #[error("cgroup v2: the chosen cgroup is not mounted")]
    ChosenNotMounted,
    /// rootfence's own v2 cgroup is not under the v2 mount.
    #[error("cgroup v2: rootfence's cgroup is not mounted")]
    OwnNotMountedV2,
    /// rootfence's own v1 cgroup of these controllers is not mounted.
    #[error("cgroup v1 {}: rootfence's cgroup is not mounted", .0.names())]
    OwnNotMountedV1(Controllers),
    /// The controllers could not be enabled for children.
    #[error(
        "cgroup v2: cannot enable the {} controllers in {}: {source}",
        .controllers.names(),
        .dir.display()
    )]
    Enable {
        /// Those not enabled yet.
        controllers: Controllers,
        /// The cgroup's directory.
        dir: PathBuf,
        /// The error writing `cgroup.subtree_control`.
        source: io::Error,
    },
    /// The probe cgroup could not be made.
    #[error(
        "cgroup {}: rootfence cannot make a cgroup in {}: {source}",
        version(*.v2),
        .dir.display()
    )]
    Make {
        /// The unified hierarchy (else a v1 one).
        v2: bool,
        /// Where.
        dir: PathBuf,
        /// The error.
        source: io::Error,
    },
    /// The probe cgroup lacks a limit file.
    #[error(
        "cgroup {}: a cgroup made in {} has no {} limit",
        version(*.v2),
        .dir.display(),
        .controllers.names()
    )]
    NoLimit {
        /// The unified hierarchy (else a v1 one).
        v2: bool,
        /// Where.
        dir: PathBuf,
        /// The controllers whose limits were looked for.
        controllers: Controllers,
    },
}

/// `v2` or `v1`.
fn version(v2: bool) -> &'static str {
    if v2 { "v2" } else { "v1" }
}

impl Place {
    /// The controllers a server's cgroup gets here.
    pub fn controllers(&self) -> Controllers {
        self.hierarchies
            .iter()
            .fold(Controllers::NONE, |c, h| Controllers {
                memory: c.memory || h.controllers.memory,
                pids: c.pids || h.controllers.pids,
            })
    }

    /// Why some controller cannot be had (empty when both can).
    pub fn why(&self) -> String {
        if self.controllers() == Controllers::BOTH {
            return String::new();
        }
        if self.why.is_empty() {
            return "no cgroup hierarchy holds the memory and pids controllers".into();
        }
        self.why
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; ")
    }

    /// What `doctor` says of it.
    pub fn support(&self) -> CgroupSupport {
        CgroupSupport {
            controllers: self.controllers(),
            at: self
                .hierarchies
                .iter()
                .map(|h| CgroupAt {
                    version: if h.v2 { 2 } else { 1 },
                    controllers: h.controllers,
                    dir: h.parent.clone(),
                })
                .collect(),
            why: Some(self.why()).filter(|w| !w.is_empty()),
        }
    }
}

/// Where this process makes its servers' cgroups: the place this boot's
/// record remembers, when it still holds ([`Remembered`]), else found by
/// trying ([`probed`]). After [`forget`], always the probed one.
pub fn place() -> &'static Place {
    static REMEMBERED: OnceLock<Option<Place>> = OnceLock::new();
    if !FORGOTTEN.load(Ordering::Acquire)
        && let Some(p) = REMEMBERED.get_or_init(|| {
            let cgroups = read_proc("/proc/self/cgroup");
            let at = depends_on(&cgroups);
            let kept = super::machine::record()
                .cgroup
                .and_then(|v| serde_json::from_value::<Remembered>(v).ok());
            from_record(kept, &cgroups, &at, &Kernel)
        })
    {
        return p;
    }
    probed()
}

/// Where this process makes its servers' cgroups, found by trying (once
/// per process), and remembered in this boot's record when both
/// controllers can be had (forgotten there when not). `doctor` asks this.
pub fn probed() -> &'static Place {
    static ONCE: OnceLock<Place> = OnceLock::new();
    ONCE.get_or_init(|| {
        let cgroups = read_proc("/proc/self/cgroup");
        let place = find(&cgroups, &read_proc("/proc/self/mountinfo"));
        let kept = place
            .to_remember(depends_on(&cgroups))
            .and_then(|k| serde_json::to_value(k).ok());
        super::machine::update(|r| r.cgroup = kept);
        place
    })
}

/// The remembered place failed a launch (the kernel refused what it
/// said): forget it, for this process and in this boot's record; from now
/// on [`place`] is the probed one.
pub fn forget() {
    FORGOTTEN.store(true, Ordering::Release);
    super::machine::update(|r| r.cgroup = None);
}

/// Set by [`forget`].
static FORGOTTEN: AtomicBool = AtomicBool::new(false);

/// A file of `/proc`, or nothing.
fn read_proc(p: &str) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}

/// Make a server's cgroup in [`place`], holding the limits `limits` gives
/// for a place. Where that place was remembered and making the cgroup
/// there fails, it is forgotten and the cgroup is made, once more, in the
/// place a probe finds (whose limits may be fewer: `limits` is asked
/// again). Returns the cgroup and the place it was made in.
pub fn create_in_place(
    limits: impl FnMut(&Place) -> Limits,
    namespaces: bool,
) -> io::Result<(Option<Cgroup>, &'static Place)> {
    create_or_again(place(), forget_and_probe, limits, namespaces)
}

/// [`forget`], then [`probed`].
fn forget_and_probe() -> &'static Place {
    forget();
    probed()
}

/// [`create_in_place`] with its places given: `first`, and where `first`
/// was remembered and fails, `again()`.
fn create_or_again<'p>(
    first: &'p Place,
    again: impl FnOnce() -> &'p Place,
    mut limits: impl FnMut(&Place) -> Limits,
    namespaces: bool,
) -> io::Result<(Option<Cgroup>, &'p Place)> {
    match Cgroup::create(first, limits(first), namespaces) {
        Err(e) if first.remembered => {
            tracing::debug!(
                "the server's cgroup cannot be made where this boot's record says ({e}): probing again"
            );
            let place = again();
            Cgroup::create(place, limits(place), namespaces).map(|c| (c, place))
        }
        r => r.map(|c| (c, first)),
    }
}

/// A place found by a probe, as this boot's record keeps it
/// ([`super::machine`], whose key holds the boot, the kernel, the user,
/// rootfence's version and its user namespace).
///
/// # Security
///
/// Only a place where both controllers could be had is kept (the record
/// never says a controller is refused, which could leave a server less
/// bounded than the kernel allows). It is taken only where what it
/// depends on is the same ([`depends_on`]: rootfence's own cgroups, its
/// mount and cgroup namespaces), where each hierarchy's directory is
/// still a cgroup filesystem rootfence may write, at or above rootfence's
/// own cgroup (never further up than a probe would choose), and, v2,
/// with the controllers still enabled for children. The launch's own
/// cgroup is then the test: where the kernel refuses it, the place is
/// forgotten and probed again ([`create_in_place`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Remembered {
    /// What it depends on besides the record's key ([`depends_on`]).
    at: String,
    hierarchies: Vec<Hierarchy>,
}

impl Place {
    /// This place as the record keeps it, found where `at`
    /// ([`depends_on`]): only a probed place with both controllers.
    fn to_remember(&self, at: String) -> Option<Remembered> {
        (!self.remembered && self.controllers() == Controllers::BOTH).then(|| Remembered {
            at,
            hierarchies: self.hierarchies.clone(),
        })
    }
}

/// What a place depends on besides the record's key: rootfence's own
/// cgroups (the text of `/proc/self/cgroup`), its mount namespace (where
/// the hierarchies are mounted) and its cgroup namespace.
fn depends_on(cgroups: &str) -> String {
    let ns = |n: &str| {
        std::fs::read_link(format!("/proc/self/ns/{n}"))
            .map(|p| p.display().to_string())
            .unwrap_or_default()
    };
    format!(
        "mnt={} cgroup={} own={}",
        ns("mnt"),
        ns("cgroup"),
        cgroups.trim()
    )
}

/// What is checked of a remembered hierarchy's directory.
trait Look {
    /// Whether `dir` is on a cgroup filesystem, v2 or v1.
    fn cgroup_fs(&self, dir: &Path, v2: bool) -> bool;
    /// Whether this process may write `p`.
    fn writable(&self, p: &Path) -> bool;
    /// The controllers a v2 cgroup's directory gives its children.
    fn enabled(&self, dir: &Path) -> Controllers;
}

/// The kernel's answers.
struct Kernel;

impl Look for Kernel {
    fn cgroup_fs(&self, dir: &Path, v2: bool) -> bool {
        let want = if v2 {
            libc::CGROUP2_SUPER_MAGIC
        } else {
            libc::CGROUP_SUPER_MAGIC
        };
        rustix::fs::statfs(dir).is_ok_and(|s| s.f_type == want)
    }

    fn writable(&self, p: &Path) -> bool {
        writable(p)
    }

    fn enabled(&self, dir: &Path) -> Controllers {
        controllers_in(
            &std::fs::read_to_string(dir.join("cgroup.subtree_control")).unwrap_or_default(),
        )
    }
}

/// The place `kept` says, where it still holds here (`cgroups`: the text
/// of `/proc/self/cgroup`; `at`: [`depends_on`] now; see [`Remembered`]).
fn from_record(
    kept: Option<Remembered>,
    cgroups: &str,
    at: &str,
    look: &impl Look,
) -> Option<Place> {
    let kept = kept?;
    if kept.at != at || kept.hierarchies.is_empty() {
        return None;
    }
    let own = parse_cgroups(cgroups);
    let mut got = Controllers::NONE;
    for h in &kept.hierarchies {
        let at_or_above = if h.v2 {
            own.iter()
                .any(|o| o.v2 && o.path.starts_with(&h.parent_cgroup))
        } else {
            let names = |c: &[String]| {
                (!h.controllers.memory || c.iter().any(|x| x == "memory"))
                    && (!h.controllers.pids || c.iter().any(|x| x == "pids"))
            };
            own.iter()
                .any(|o| !o.v2 && names(&o.controllers) && o.path == h.parent_cgroup)
        };
        let holds = at_or_above
            && look.cgroup_fs(&h.parent, h.v2)
            && look.writable(&h.parent)
            && (!h.v2
                || (look.writable(&h.parent.join("cgroup.procs"))
                    && look.enabled(&h.parent).and(h.controllers) == h.controllers));
        if !holds {
            return None;
        }
        got = Controllers {
            memory: got.memory || h.controllers.memory,
            pids: got.pids || h.controllers.pids,
        };
    }
    (got == Controllers::BOTH).then(|| Place {
        hierarchies: kept.hierarchies,
        why: Vec::new(),
        remembered: true,
    })
}

/// A line of `/proc/self/cgroup`: the controllers (empty for v2) and the
/// cgroup's path.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Membership {
    v2: bool,
    controllers: Vec<String>,
    path: PathBuf,
}

/// The lines of `/proc/self/cgroup`.
fn parse_cgroups(text: &str) -> Vec<Membership> {
    text.lines()
        .filter_map(|l| {
            let mut f = l.splitn(3, ':');
            let id = f.next()?;
            let controllers = f.next()?;
            let path = f.next()?;
            Some(Membership {
                v2: id == "0" && controllers.is_empty(),
                controllers: controllers
                    .split(',')
                    .filter(|c| !c.is_empty())
                    .map(String::from)
                    .collect(),
                path: PathBuf::from(path),
            })
        })
        .collect()
}

/// A cgroup filesystem as `/proc/self/mountinfo` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mount {
    v2: bool,
    /// The cgroup mounted there (its path in the hierarchy).
    root: PathBuf,
    /// Where.
    point: PathBuf,
    /// v1: the controllers of the hierarchy.
    controllers: Vec<String>,
}

impl Mount {
    /// The directory of the cgroup `cgroup` (a path in the hierarchy), if
    /// this mount shows it.
    fn dir_of(&self, cgroup: &Path) -> Option<PathBuf> {
        let rel = cgroup.strip_prefix(&self.root).ok()?;
        Some(if rel.as_os_str().is_empty() {
            self.point.clone()
        } else {
            self.point.join(rel)
        })
    }
}

/// The cgroup filesystems of `/proc/self/mountinfo`.
fn parse_mounts(text: &str) -> Vec<Mount> {
    text.lines()
        .filter_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            let left: Vec<&str> = left.split(' ').collect();
            let mut right = right.split(' ');
            let fstype = right.next()?;
            let _source = right.next()?;
            let options = right.next().unwrap_or("");
            let v2 = match fstype {
                "cgroup2" => true,
                "cgroup" => false,
                _ => return None,
            };
            Some(Mount {
                v2,
                root: PathBuf::from(unescape(left.get(3)?)),
                point: PathBuf::from(unescape(left.get(4)?)),
                controllers: if v2 {
                    Vec::new()
                } else {
                    options.split(',').map(String::from).collect()
                },
            })
        })
        .collect()
}

/// A mountinfo field with its octal escapes (`\040` for a space) undone.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 3 < b.len()
            && b[i + 1..=i + 3].iter().all(|c| (b'0'..=b'7').contains(c))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// What choosing a v2 cgroup needs to know of one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Seen {
    /// It holds processes.
    procs: bool,
    /// rootfence may make cgroups in it and move processes between them
    /// (its directory and its `cgroup.procs` are writable).
    writable: bool,
    /// The controllers it can give its children (`cgroup.controllers`).
    offered: Controllers,
    /// Those of them already given (`cgroup.subtree_control`).
    enabled: Controllers,
}

/// The v2 cgroup (a path in the hierarchy) servers' cgroups go in, given
/// rootfence's own `own` and what `look` sees of a cgroup: the nearest
/// ancestor that holds no process (or the root, which may), when it
/// offers a controller and rootfence may write it. Never one further up:
/// a server stays inside what bounds rootfence itself.
fn choose_v2(
    own: &Path,
    look: impl Fn(&Path) -> Option<Seen>,
) -> Result<(PathBuf, Seen), NoHierarchy> {
    let root = Path::new("/");
    let candidates: Vec<&Path> = if own == root {
        vec![root]
    } else {
        own.ancestors().skip(1).collect()
    };
    for c in candidates {
        let Some(seen) = look(c) else {
            return Err(NoHierarchy::Unreadable(c.to_path_buf()));
        };
        if seen.procs && c != root {
            continue;
        }
        if !seen.offered.any() {
            return Err(NoHierarchy::NoController(c.to_path_buf()));
        }
        if !seen.writable {
            return Err(NoHierarchy::NotDelegated(c.to_path_buf()));
        }
        return Ok((c.to_path_buf(), seen));
    }
    Err(NoHierarchy::NoAncestor)
}

/// What a v2 cgroup's directory shows.
fn look_v2(dir: &Path) -> Option<Seen> {
    let read = |f: &str| std::fs::read_to_string(dir.join(f)).ok();
    let offered = controllers_in(&read("cgroup.controllers")?);
    Some(Seen {
        procs: !read("cgroup.procs")?.trim().is_empty(),
        writable: writable(dir) && writable(&dir.join("cgroup.procs")),
        offered: offered.and(Controllers::BOTH),
        enabled: controllers_in(&read("cgroup.subtree_control").unwrap_or_default()),
    })
}

/// The memory and pids controllers named in a `cgroup.controllers` or
/// `cgroup.subtree_control` file.
fn controllers_in(text: &str) -> Controllers {
    let has = |n| text.split_whitespace().any(|c| c == n);
    Controllers {
        memory: has("memory"),
        pids: has("pids"),
    }
}

/// Whether this process may write `p` (effective ids).
fn writable(p: &Path) -> bool {
    rustix::fs::access(p, rustix::fs::Access::WRITE_OK).is_ok()
}

/// Find where servers' cgroups go, from `/proc/self/cgroup` and
/// `/proc/self/mountinfo`, by trying: v2 for what it holds, v1 for the
/// rest.
fn find(cgroups: &str, mountinfo: &str) -> Place {
    let own = parse_cgroups(cgroups);
    let mounts = parse_mounts(mountinfo);
    let mut place = Place::default();
    let mut want = Controllers::BOTH;
    if let (Some(m), Some(o)) = (mounts.iter().find(|m| m.v2), own.iter().find(|o| o.v2)) {
        match v2_hierarchy(m, &o.path) {
            Ok(h) => {
                want = want.without(h.controllers);
                place.hierarchies.push(h);
            }
            Err(why) => place.why.push(why),
        }
    }
    for (name, c) in [
        (
            "memory",
            Controllers {
                memory: true,
                pids: false,
            },
        ),
        (
            "pids",
            Controllers {
                memory: false,
                pids: true,
            },
        ),
    ] {
        if !want.and(c).any() {
            continue;
        }
        let has = |cs: &[String]| cs.iter().any(|x| x == name);
        let (Some(m), Some(o)) = (
            mounts.iter().find(|m| !m.v2 && has(&m.controllers)),
            own.iter().find(|o| !o.v2 && has(&o.controllers)),
        ) else {
            continue;
        };
        match v1_hierarchy(m, &o.path, c) {
            Ok(h) => {
                want = want.without(h.controllers);
                place.hierarchies.push(h);
            }
            Err(why) => place.why.push(why),
        }
    }
    place
}

/// The v2 hierarchy's place, its controllers enabled for servers'
/// cgroups, tried with a probe cgroup.
fn v2_hierarchy(m: &Mount, own: &Path) -> Result<Hierarchy, NoHierarchy> {
    let (parent_cgroup, seen) = choose_v2(own, |c| look_v2(&m.dir_of(c)?))?;
    let parent = m
        .dir_of(&parent_cgroup)
        .ok_or(NoHierarchy::ChosenNotMounted)?;
    let missing = seen.offered.without(seen.enabled);
    if missing.any() {
        let text = format!(
            "{}{}",
            if missing.memory { "+memory " } else { "" },
            if missing.pids { "+pids" } else { "" }
        );
        write_file(&parent.join("cgroup.subtree_control"), text.trim()).map_err(|source| {
            NoHierarchy::Enable {
                controllers: missing,
                dir: parent.clone(),
                source,
            }
        })?;
    }
    let h = Hierarchy {
        v2: true,
        controllers: seen.offered,
        parent,
        parent_cgroup,
        home: m.dir_of(own).ok_or(NoHierarchy::OwnNotMountedV2)?,
    };
    try_probe(&h).map(|()| h)
}

/// A v1 hierarchy's place (rootfence's own cgroup there), tried with a
/// probe cgroup.
fn v1_hierarchy(m: &Mount, own: &Path, c: Controllers) -> Result<Hierarchy, NoHierarchy> {
    let dir = m.dir_of(own).ok_or(NoHierarchy::OwnNotMountedV1(c))?;
    let h = Hierarchy {
        v2: false,
        controllers: c,
        parent: dir.clone(),
        parent_cgroup: own.to_path_buf(),
        home: dir,
    };
    try_probe(&h).map(|()| h)
}

/// Make and remove a probe cgroup in `h`.
fn try_probe(h: &Hierarchy) -> Result<(), NoHierarchy> {
    let dir = h
        .parent
        .join(format!("{PREFIX}probe-{}", super::scratch::random_u64()));
    std::fs::create_dir(&dir).map_err(|source| NoHierarchy::Make {
        v2: h.v2,
        dir: h.parent.clone(),
        source,
    })?;
    let files_there = limit_files(h).iter().all(|f| dir.join(f).exists());
    let _ = std::fs::remove_dir(&dir);
    if !files_there {
        return Err(NoHierarchy::NoLimit {
            v2: h.v2,
            dir: h.parent.clone(),
            controllers: h.controllers,
        });
    }
    Ok(())
}

/// The limit files a server's cgroup in `h` must have.
fn limit_files(h: &Hierarchy) -> Vec<&'static str> {
    let mut v = Vec::new();
    if h.controllers.memory {
        v.push(if h.v2 {
            "memory.max"
        } else {
            "memory.limit_in_bytes"
        });
    }
    if h.controllers.pids {
        v.push("pids.max");
    }
    v
}

/// Prefix of the name of every cgroup rootfence makes.
const PREFIX: &str = "rootfence-";

/// A cgroup younger than this is never swept: it may be one another
/// rootfence has just made and not yet locked.
const SWEEP_MIN_AGE: Duration = Duration::from_secs(60);

/// How long the removal of a server's cgroup waits for what it killed in
/// it to be gone.
const REMOVE_WAIT: Duration = Duration::from_secs(2);

/// The bounds a server's cgroup holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Limits {
    /// Bytes of memory (no swap beyond).
    pub memory: Option<u64>,
    /// Processes and threads.
    pub pids: Option<u64>,
}

impl Limits {
    /// The controllers these limits need.
    fn controllers(self) -> Controllers {
        Controllers {
            memory: self.memory.is_some(),
            pids: self.pids.is_some(),
        }
    }
}

/// A server's cgroup in one hierarchy.
#[derive(Debug)]
struct Leaf {
    dir: PathBuf,
    /// Its path in the hierarchy (as `/proc/PID/cgroup` names it).
    cgroup: PathBuf,
    v2: bool,
    /// The directory, open and locked: tells [`sweep_stale`] it is in use
    /// (and, v2, `clone3` starts the child in it).
    lock: File,
    /// The file the child writes `0` to, to join it where `clone3` did not
    /// start it there: v2 `cgroup.procs`; v1 `tasks`, which moves the
    /// writing thread only (the child has no other) without the global
    /// lock, and its RCU grace period, that moving a whole process takes.
    join: Option<OwnedFd>,
    /// v1, with namespaces: rootfence's own cgroup's `tasks`, where the
    /// init moves itself back once the rest of the namespace is gone.
    leave: Option<OwnedFd>,
}

/// A file the child writes `0` to, to join the server's cgroup.
#[derive(Debug, Clone, Copy)]
pub struct Join {
    /// The file, open for writing.
    pub fd: RawFd,
    /// Of cgroup v2 (where `clone3` may have started the child already).
    pub v2: bool,
}

/// A server's own cgroup (one per hierarchy that holds its controllers),
/// removed, with anything left in it killed, when dropped.
#[derive(Debug, Default)]
pub struct Cgroup {
    leaves: Vec<Leaf>,
}

impl Cgroup {
    /// Make a server's cgroup in `place` holding `limits`; with
    /// `namespaces`, also open what the init needs to move itself back
    /// out. `None` when `limits` need no cgroup here.
    pub fn create(place: &Place, limits: Limits, namespaces: bool) -> io::Result<Option<Cgroup>> {
        let mut cg = Cgroup::default();
        // The same name in every hierarchy; random after the pid, since
        // rootfences in other PID namespaces (inside bubblewrap, say) share
        // the parent and may have the same pid.
        let name = format!(
            "{PREFIX}{}-{}",
            std::process::id(),
            super::scratch::random_u64()
        );
        for h in &place.hierarchies {
            let here = h.controllers.and(limits.controllers());
            if !here.any() {
                continue;
            }
            let dir = h.parent.join(&name);
            std::fs::create_dir(&dir).map_err(|e| at(&dir, e))?;
            let lock = match open_dir(&dir).and_then(|d| lock(&d).map(|()| d)) {
                Ok(d) => d,
                Err(e) => {
                    let _ = std::fs::remove_dir(&dir);
                    return Err(at(&dir, e));
                }
            };
            cg.leaves.push(Leaf {
                dir: dir.clone(),
                cgroup: h.parent_cgroup.join(&name),
                v2: h.v2,
                lock,
                join: None,
                leave: None,
            });
            set_limits(&dir, h.v2, here, limits)?;
            let join = open_write(&dir.join(if h.v2 { "cgroup.procs" } else { "tasks" }))?;
            let leave = if namespaces && !h.v2 {
                Some(open_write(&h.home.join("tasks"))?)
            } else {
                None
            };
            if let Some(l) = cg.leaves.last_mut() {
                l.join = Some(join);
                l.leave = leave;
            }
        }
        if cg.leaves.is_empty() {
            return Ok(None);
        }
        Ok(Some(cg))
    }

    /// The files the child writes `0` to (joining the cgroup).
    pub fn joins(&self) -> Vec<Join> {
        self.leaves
            .iter()
            .filter_map(|l| {
                Some(Join {
                    fd: l.join.as_ref()?.as_raw_fd(),
                    v2: l.v2,
                })
            })
            .collect()
    }

    /// The cgroup v2 directory `clone3` may start the child in.
    pub fn clone_into(&self) -> Option<RawFd> {
        self.leaves
            .iter()
            .find(|l| l.v2)
            .map(|l| l.lock.as_raw_fd())
    }

    /// Whether the init stays in the cgroup until it exits (v2: moving it
    /// out would cost an RCU grace period, more than waiting for its
    /// exit), so that rootfence must reap it before removing the cgroup.
    pub fn held_until_exit(&self) -> bool {
        self.leaves.iter().any(|l| l.v2)
    }

    /// The descriptors the init writes `0` to once the rest of its
    /// namespace is gone (leaving the cgroup, v1).
    pub fn leave_fds(&self) -> Vec<RawFd> {
        self.leaves
            .iter()
            .filter_map(|l| l.leave.as_ref().map(AsRawFd::as_raw_fd))
            .collect()
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        for l in &self.leaves {
            if let Err(e) = remove(&l.dir, &l.cgroup, l.v2) {
                tracing::warn!(
                    "cannot remove the server's cgroup {}: {e}; the next rootfence removes it",
                    l.dir.display()
                );
            }
        }
    }
}

/// `e` naming the cgroup it was met at.
fn at(dir: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", dir.display()))
}

/// Write `limits` (of the controllers `c`) into the cgroup `dir`.
fn set_limits(dir: &Path, v2: bool, c: Controllers, limits: Limits) -> io::Result<()> {
    let set = |f: &str, v: &str| write_file(&dir.join(f), v).map_err(|e| at(&dir.join(f), e));
    // Present only where the kernel accounts swap.
    let set_if_there = |f: &str, v: &str| match write_file(&dir.join(f), v) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        r => r.map_err(|e| at(&dir.join(f), e)),
    };
    if let (true, Some(bytes)) = (c.memory, limits.memory) {
        let bytes = bytes.to_string();
        if v2 {
            set("memory.max", &bytes)?;
            set_if_there("memory.swap.max", "0")?;
        } else {
            set("memory.limit_in_bytes", &bytes)?;
            set_if_there("memory.memsw.limit_in_bytes", &bytes)?;
        }
    }
    if let (true, Some(n)) = (c.pids, limits.pids) {
        set("pids.max", &n.to_string())?;
    }
    Ok(())
}

/// Write `value` to an existing file of a cgroup.
fn write_file(path: &Path, value: &str) -> io::Result<()> {
    std::fs::OpenOptions::new()
        .write(true)
        .open(path)?
        .write_all(value.as_bytes())
}

/// Open a file for writing, close-on-exec.
fn open_write(path: &Path) -> io::Result<OwnedFd> {
    std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_CLOEXEC)
        .open(path)
        .map(OwnedFd::from)
        .map_err(|e| at(path, e))
}

/// Open a directory (not through a symbolic link), close-on-exec.
fn open_dir(path: &Path) -> io::Result<File> {
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// Take the directory's lock without waiting.
fn lock(dir: &File) -> io::Result<()> {
    rustix::fs::flock(
        dir.as_fd(),
        rustix::fs::FlockOperation::NonBlockingLockExclusive,
    )
    .map_err(io::Error::from)
}

/// Kill what is left in the cgroup `dir` (`cgroup`, as `/proc/PID/cgroup`
/// names it) and remove it, waiting up to [`REMOVE_WAIT`] for the killed
/// to be gone.
fn remove(dir: &Path, cgroup: &Path, v2: bool) -> io::Result<()> {
    let start = std::time::Instant::now();
    let mut round = 0u32;
    loop {
        match std::fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
            Err(e) if e.raw_os_error() == Some(libc::EBUSY) && start.elapsed() < REMOVE_WAIT => {
                if round.is_multiple_of(50) {
                    kill_all(dir, cgroup, v2);
                }
                round += 1;
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => return Err(e),
        }
    }
}

/// Kill every process in the cgroup `dir`: `cgroup.kill` (Linux 5.14,
/// v2), else each process listed, through a pidfd checked to be in the
/// cgroup still (a pid reused meanwhile is not touched).
fn kill_all(dir: &Path, cgroup: &Path, v2: bool) {
    if v2 && write_file(&dir.join("cgroup.kill"), "1").is_ok() {
        return;
    }
    let mut text = String::new();
    let listed = File::open(dir.join("cgroup.procs")).and_then(|mut f| f.read_to_string(&mut text));
    if listed.is_err() {
        return;
    }
    for pid in text
        .lines()
        .filter_map(|l| l.trim().parse::<libc::pid_t>().ok())
    {
        // SAFETY: pidfd_open with integer arguments.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
        if fd < 0 {
            continue;
        }
        // SAFETY: the kernel returned a new descriptor we own.
        let pidfd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
        let inside = std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
            .is_ok_and(|t| in_cgroup(&t, cgroup, v2));
        if inside {
            let _ = super::pidfd::signal(&pidfd, libc::SIGKILL);
        }
    }
}

/// Whether a `/proc/PID/cgroup` text puts the process in `cgroup` (of
/// the unified hierarchy, or of a v1 one).
fn in_cgroup(text: &str, cgroup: &Path, v2: bool) -> bool {
    parse_cgroups(text)
        .iter()
        .any(|m| m.v2 == v2 && m.path == cgroup)
}

/// Remove, once per process and in the background, the cgroups that
/// rootfences which are gone (killed before they could clean up) left in
/// `place`, killing what is left in them.
pub fn sweep_stale(place: &'static Place) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let spawned = std::thread::Builder::new()
            .name("cgroup-sweep".into())
            .spawn(move || {
                let n: usize = place
                    .hierarchies
                    .iter()
                    .map(|h| sweep_in(&h.parent, &h.parent_cgroup, h.v2))
                    .sum();
                if n > 0 {
                    tracing::info!("removed {n} cgroups left by rootfences that were killed");
                }
            });
        if let Err(e) = spawned {
            tracing::debug!("no sweep of old cgroups: {e}");
        }
    });
}

/// Remove the stale cgroups in `parent`; returns how many.
///
/// A cgroup is removed only if its name is one rootfence gives
/// (`rootfence-PID-N`, `rootfence-probe-PID`), it is at least
/// [`SWEEP_MIN_AGE`] old, and its lock can be taken (no live rootfence, in
/// any PID namespace, holds it).
fn sweep_in(parent: &Path, parent_cgroup: &Path, v2: bool) -> usize {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_str().is_some_and(is_ours) {
            continue;
        }
        let path = entry.path();
        let old = std::fs::symlink_metadata(&path)
            .ok()
            .and_then(|m| m.modified().ok())
            .and_then(|m| m.elapsed().ok())
            .is_some_and(|age| age >= SWEEP_MIN_AGE);
        if !old {
            continue;
        }
        let Ok(dir) = open_dir(&path) else { continue };
        if lock(&dir).is_err() {
            continue;
        }
        match remove(&path, &parent_cgroup.join(&name), v2) {
            Ok(()) => removed += 1,
            Err(e) => tracing::debug!("cannot remove {}: {e}", path.display()),
        }
    }
    removed
}

/// Whether `name` is one rootfence gives its cgroups.
fn is_ours(name: &str) -> bool {
    let Some(rest) = name.strip_prefix(PREFIX) else {
        return false;
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit());
    match rest.split_once('-') {
        Some(("probe", pid)) => digits(pid),
        Some((pid, n)) => digits(pid) && digits(n),
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HYBRID: &str =
        "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/0b22\n3:cpuset:/\n0::/\n";

    #[test]
    fn cgroup_lines_tell_v2_from_v1() {
        let m = parse_cgroups(HYBRID);
        assert_eq!(m.len(), 5);
        assert!(m[4].v2 && m[4].path == Path::new("/"));
        assert!(!m[2].v2 && m[2].controllers == ["memory"]);
        assert_eq!(m[2].path, Path::new("/process_api/0b22"));
        assert!(!m[0].v2, "a named v1 hierarchy is not v2");
        assert!(in_cgroup(HYBRID, Path::new("/process_api/0b22"), false));
        assert!(!in_cgroup(HYBRID, Path::new("/process_api"), false));
        assert!(in_cgroup(HYBRID, Path::new("/"), true));
    }

    #[test]
    fn mountinfo_gives_cgroup_mounts_with_their_roots() {
        let text = "\
35 24 0:30 / /sys/fs/cgroup rw,nosuid - tmpfs tmpfs rw,mode=755\n\
40 35 0:35 / /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n\
41 35 0:36 /docker/abc /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n\
45 35 0:40 / /sys/fs/cgroup/my\\040dir rw - cgroup2 cgroup2 rw,nsdelegate\n";
        let m = parse_mounts(text);
        assert_eq!(m.len(), 3);
        assert_eq!(m[0].controllers, ["rw", "memory"]);
        assert!(m[2].v2 && m[2].point == Path::new("/sys/fs/cgroup/my dir"));
        assert_eq!(
            m[1].dir_of(Path::new("/docker/abc/x")),
            Some(PathBuf::from("/sys/fs/cgroup/pids/x"))
        );
        assert_eq!(
            m[1].dir_of(Path::new("/docker/abc")),
            Some(PathBuf::from("/sys/fs/cgroup/pids"))
        );
        assert_eq!(m[1].dir_of(Path::new("/other")), None);
    }

    fn seen(procs: bool, writable: bool) -> Seen {
        Seen {
            procs,
            writable,
            offered: Controllers::BOTH,
            enabled: Controllers::BOTH,
        }
    }

    #[test]
    fn v2_takes_the_nearest_ancestor_without_processes() {
        // A user's application scope in its user manager's subtree.
        let own = Path::new("/user.slice/user-1000.slice/user@1000.service/app.slice/app-x.scope");
        let look = |c: &Path| {
            Some(match c.to_str()? {
                "/user.slice/user-1000.slice/user@1000.service/app.slice" => seen(false, true),
                _ => seen(false, false),
            })
        };
        let (c, _) = choose_v2(own, look).expect("the app slice");
        assert_eq!(
            c,
            Path::new("/user.slice/user-1000.slice/user@1000.service/app.slice")
        );
    }

    #[test]
    fn v2_skips_ancestors_with_processes_and_stops_at_the_first_without() {
        let own = Path::new("/a/b/c");
        // b holds processes (a threaded or misconfigured tree); a does not
        // and is writable.
        let look = |c: &Path| Some(seen(c == Path::new("/a/b"), c == Path::new("/a")));
        assert_eq!(
            choose_v2(own, look).map(|r| r.0).ok(),
            Some(PathBuf::from("/a"))
        );
        // A session scope whose slice the user may not write: refused,
        // and never looked for further up.
        let look = |c: &Path| Some(seen(false, c == Path::new("/")));
        let e = choose_v2(own, look).unwrap_err();
        assert!(
            matches!(&e, NoHierarchy::NotDelegated(c) if c == Path::new("/a/b")),
            "{e:?}"
        );
        assert!(
            e.to_string().contains("may not make cgroups in /a/b"),
            "{e}"
        );
    }

    #[test]
    fn v2_at_the_root_may_hold_processes() {
        let look = |_: &Path| Some(seen(true, true));
        assert_eq!(
            choose_v2(Path::new("/"), look).map(|r| r.0).ok(),
            Some(PathBuf::from("/"))
        );
        let none = |_: &Path| {
            Some(Seen {
                offered: Controllers::NONE,
                ..seen(false, true)
            })
        };
        let e = choose_v2(Path::new("/x"), none).unwrap_err();
        assert!(matches!(e, NoHierarchy::NoController(_)), "{e:?}");
        assert!(
            e.to_string().contains("neither the memory nor the pids"),
            "{e}"
        );
    }

    #[test]
    fn only_rootfences_own_names_are_swept() {
        assert!(is_ours("rootfence-123-0"));
        assert!(is_ours("rootfence-probe-77"));
        assert!(!is_ours("rootfence-123"));
        assert!(!is_ours("rootfence-12a-1"));
        assert!(!is_ours("session-3.scope"));
        assert!(!is_ours("rootfence-probe-"));
    }

    #[test]
    fn controllers_are_read_from_their_files() {
        assert_eq!(
            controllers_in("cpuset cpu io memory hugetlb pids rdma"),
            Controllers::BOTH
        );
        assert_eq!(controllers_in("hugetlb"), Controllers::NONE);
        assert_eq!(controllers_in("memory").names(), "memory".to_string());
        assert_eq!(Controllers::BOTH.names(), "memory and pids");
    }

    /// What a remembered hierarchy's checks see, each answer set.
    struct Seen2 {
        cgroup_fs: bool,
        writable: bool,
        enabled: Controllers,
    }

    impl Look for Seen2 {
        fn cgroup_fs(&self, _: &Path, _: bool) -> bool {
            self.cgroup_fs
        }
        fn writable(&self, _: &Path) -> bool {
            self.writable
        }
        fn enabled(&self, _: &Path) -> Controllers {
            self.enabled
        }
    }

    const ALL_HOLDS: Seen2 = Seen2 {
        cgroup_fs: true,
        writable: true,
        enabled: Controllers::BOTH,
    };

    fn v1(c: Controllers, cgroup: &str, dir: &str) -> Hierarchy {
        Hierarchy {
            v2: false,
            controllers: c,
            parent: PathBuf::from(dir),
            parent_cgroup: PathBuf::from(cgroup),
            home: PathBuf::from(dir),
        }
    }

    const MEMORY: Controllers = Controllers {
        memory: true,
        pids: false,
    };
    const PIDS: Controllers = Controllers {
        memory: false,
        pids: true,
    };

    /// The place found on the hybrid machine of [`HYBRID`].
    fn hybrid_place() -> Place {
        Place {
            hierarchies: vec![
                v1(
                    MEMORY,
                    "/process_api/0b22",
                    "/sys/fs/cgroup/memory/process_api/0b22",
                ),
                v1(PIDS, "/", "/sys/fs/cgroup/pids"),
            ],
            ..Place::default()
        }
    }

    #[test]
    fn only_a_probed_place_with_both_controllers_is_remembered() {
        let kept = hybrid_place().to_remember("at".into()).unwrap();
        assert_eq!(kept.hierarchies, hybrid_place().hierarchies);
        let text = serde_json::to_string(&kept).unwrap();
        assert_eq!(serde_json::from_str::<Remembered>(&text).unwrap(), kept);
        let partial = Place {
            hierarchies: vec![hybrid_place().hierarchies[0].clone()],
            ..Place::default()
        };
        assert_eq!(
            partial.to_remember("at".into()),
            None,
            "a refusal is never kept"
        );
        assert_eq!(Place::default().to_remember("at".into()), None);
        let again = Place {
            remembered: true,
            ..hybrid_place()
        };
        assert_eq!(again.to_remember("at".into()), None);
    }

    #[test]
    fn what_a_place_depends_on_names_rootfences_cgroups_and_namespaces() {
        let at = depends_on(HYBRID);
        for part in ["mnt=", "cgroup=", "own=", "4:memory:/process_api/0b22"] {
            assert!(at.contains(part), "{at}");
        }
        assert_ne!(at, depends_on("0::/other\n"));
    }

    #[test]
    fn a_remembered_place_is_taken_only_where_it_still_holds() {
        let kept = || hybrid_place().to_remember("here".into());
        let got = from_record(kept(), HYBRID, "here", &ALL_HOLDS).unwrap();
        assert!(got.remembered);
        assert_eq!(got.controllers(), Controllers::BOTH);
        assert_eq!(got.hierarchies, hybrid_place().hierarchies);
        assert!(from_record(None, HYBRID, "here", &ALL_HOLDS).is_none());
        // Elsewhere: another cgroup of rootfence's, other namespaces.
        assert!(from_record(kept(), HYBRID, "there", &ALL_HOLDS).is_none());
        // rootfence is no longer in the remembered v1 cgroup.
        let moved = HYBRID.replace("/process_api/0b22", "/process_api/other");
        assert!(from_record(kept(), &moved, "here", &ALL_HOLDS).is_none());
        // Not a cgroup filesystem, or not writable.
        let not_cgroup = Seen2 {
            cgroup_fs: false,
            ..ALL_HOLDS
        };
        assert!(from_record(kept(), HYBRID, "here", &not_cgroup).is_none());
        let read_only = Seen2 {
            writable: false,
            ..ALL_HOLDS
        };
        assert!(from_record(kept(), HYBRID, "here", &read_only).is_none());
        // A record that holds fewer than both controllers is not taken.
        let half = Remembered {
            at: "here".into(),
            hierarchies: vec![hybrid_place().hierarchies[1].clone()],
        };
        assert!(from_record(Some(half), HYBRID, "here", &ALL_HOLDS).is_none());
    }

    #[test]
    fn a_remembered_v2_place_is_at_or_above_rootfence_with_its_controllers_enabled() {
        let own = "0::/user.slice/user-1000.slice/user@1000.service/app.slice/app-x.scope\n";
        let h = |cgroup: &str| Hierarchy {
            v2: true,
            controllers: Controllers::BOTH,
            parent: PathBuf::from("/sys/fs/cgroup").join(cgroup.trim_start_matches('/')),
            parent_cgroup: PathBuf::from(cgroup),
            home: PathBuf::from("/sys/fs/cgroup/x"),
        };
        let kept = |cgroup: &str| {
            Some(Remembered {
                at: "here".into(),
                hierarchies: vec![h(cgroup)],
            })
        };
        let above = "/user.slice/user-1000.slice/user@1000.service/app.slice";
        assert!(from_record(kept(above), own, "here", &ALL_HOLDS).is_some());
        assert!(
            from_record(kept("/system.slice"), own, "here", &ALL_HOLDS).is_none(),
            "not above rootfence"
        );
        let only_memory = Seen2 {
            enabled: MEMORY,
            ..ALL_HOLDS
        };
        assert!(
            from_record(kept(above), own, "here", &only_memory).is_none(),
            "pids no longer enabled for children"
        );
    }

    #[test]
    fn where_the_kernel_refuses_a_remembered_place_it_is_probed_again() {
        // A remembered place whose directory is not a cgroup: the cgroup is
        // made there, but its limit files are missing.
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().to_str().unwrap();
        let stale = Place {
            hierarchies: vec![v1(Controllers::BOTH, "/", dir)],
            remembered: true,
            ..Place::default()
        };
        let probed = Place::default();
        let limits = Limits {
            memory: Some(1 << 30),
            pids: Some(100),
        };
        let mut asked = Vec::new();
        let (made, place) = create_or_again(
            &stale,
            || &probed,
            |p| {
                asked.push(p.controllers());
                limits
            },
            false,
        )
        .unwrap();
        assert!(made.is_none(), "the probed place gives no cgroup");
        assert!(std::ptr::eq(place, &probed));
        assert_eq!(asked, [Controllers::BOTH, Controllers::NONE]);
        assert_eq!(
            std::fs::read_dir(t.path()).unwrap().count(),
            0,
            "the failed cgroup is removed"
        );
        // A probed place that fails is an error, not tried again.
        let fresh = Place {
            remembered: false,
            ..stale
        };
        let e = create_or_again(&fresh, || panic!("probed again"), |_| limits, false);
        assert!(e.is_err());
    }
}
