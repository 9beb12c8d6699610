//! What the sandbox refused a server, as rootfence saw it: the judgement
//! of one path call the server made ([`judge`]) and the bounded record of
//! the refusals ([`Record`]).
//!
//! The path comes from the call itself, read by rootfence's supervisor
//! (see `seccomp::observer`), never from what the server prints. Whether
//! the sandbox refuses it is decided here from what rootfence knows of the
//! sandbox it built: whether the path is in the server's view (looked up
//! there by the supervisor) and the Landlock rights of the ruleset
//! rootfence made. A refusal is recorded only for a path that exists
//! outside the sandbox (looked up by rootfence itself): what the server
//! asks for and exists nowhere is no refusal.
//!
//! Pure: every fact is given.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use crate::runtime::Rights;

/// Most distinct paths a [`Record`] keeps.
pub const MAX_PATHS: usize = 4096;

/// What the server needed of a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Need {
    /// To see it (`stat`, `access`, `readlink`): only the view refuses
    /// that.
    Look,
    /// To read it (open a file, list a directory).
    Read,
    /// To run it.
    Exec,
    /// To write it, or (for a directory) create or remove an entry.
    Write,
}

/// Why the sandbox refuses a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RefusedBy {
    /// It is not in the server's view (the server gets `ENOENT`).
    NotInView,
    /// It is in the view, read-only (`EROFS`).
    ReadOnlyInView,
    /// It is in the view, on a mount that runs nothing.
    NoExecInView,
    /// Landlock: no rule grants it (`EACCES`).
    NotGranted,
    /// Landlock: granted, but not for this (`EACCES`).
    GrantedLess,
}

impl fmt::Display for RefusedBy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RefusedBy::NotInView => "not in the view",
            RefusedBy::ReadOnlyInView => "read-only in the view",
            RefusedBy::NoExecInView => "not executable in the view",
            RefusedBy::NotGranted => "Landlock: not granted",
            RefusedBy::GrantedLess => "Landlock: granted, not for this",
        })
    }
}

/// What a path is outside the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link (looked at, not followed).
    Symlink,
    /// A socket, a FIFO or a device: another program's endpoint or the
    /// kernel's.
    Special,
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Kind::File => "a file",
            Kind::Dir => "a directory",
            Kind::Symlink => "a symbolic link",
            Kind::Special => "a socket, FIFO or device",
        })
    }
}

/// The path as rootfence found it outside the sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Outside {
    /// What it is.
    pub kind: Kind,
    /// Its owner.
    pub uid: u32,
}

/// The path in the server's view, as the supervisor found it there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InView {
    /// Not there.
    Missing,
    /// There, on a mount with these flags.
    Present {
        /// Mounted read-only.
        read_only: bool,
        /// Mounted `noexec`.
        noexec: bool,
    },
}

/// What rootfence knows of a server's sandbox.
#[derive(Debug, Clone, Default)]
pub struct Sandbox {
    /// The server has a view of its own (namespaces): what is not granted
    /// is not there.
    pub view: bool,
    /// Landlock confines it.
    pub landlock: bool,
    /// The ruleset's paths and their rights (each path's rules cover what
    /// is beneath it).
    pub grants: Vec<(PathBuf, Rights)>,
    /// The TCP ports it may connect to, when its connections are judged
    /// here (not with network by domain, whose proxy judges them).
    pub tcp_connect: Option<Vec<u16>>,
}

/// What observing a server saw the sandbox refuse it, as it is seen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Seen {
    /// A path.
    Path(Refusal),
    /// A TCP connection to this address (its port not granted).
    Connect(std::net::SocketAddr),
    /// A UDP socket (what a name lookup opens first) where the policy
    /// allows no UDP.
    Udp,
}

impl Sandbox {
    /// The rights Landlock gives `path`: the union of the rules on it and
    /// its ancestors.
    pub fn rights(&self, path: &Path) -> Rights {
        self.grants
            .iter()
            .filter(|(g, _)| path.starts_with(g))
            .fold(Rights::default(), |a, (_, r)| a.union(*r))
    }
}

/// Whether the sandbox refuses `need` on `path` (canonical, as Landlock's
/// rules name it), found in the view as `in_view` (`None` without a view,
/// or when it could not be looked up there).
pub fn judge(s: &Sandbox, need: Need, path: &Path, in_view: Option<InView>) -> Option<RefusedBy> {
    if s.view {
        match in_view? {
            InView::Missing => return Some(RefusedBy::NotInView),
            InView::Present { read_only, .. } if read_only && need == Need::Write => {
                return Some(RefusedBy::ReadOnlyInView);
            }
            InView::Present { noexec, .. } if noexec && need == Need::Exec => {
                return Some(RefusedBy::NoExecInView);
            }
            InView::Present { .. } => {}
        }
    }
    if need == Need::Look || !s.landlock {
        return None;
    }
    let r = s.rights(path);
    let ok = match need {
        Need::Look => true,
        Need::Read => r.read,
        Need::Exec => r.exec,
        Need::Write => r.write,
    };
    match (ok, r == Rights::default()) {
        (true, _) => None,
        (false, true) => Some(RefusedBy::NotGranted),
        (false, false) => Some(RefusedBy::GrantedLess),
    }
}

/// One path the sandbox refused the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The path (canonical outside), or, for an entry the server could not
    /// create or remove, its directory.
    pub path: PathBuf,
    /// The path the server named, when it is not `path`.
    pub asked: Option<PathBuf>,
    /// `path` is the directory of the entry the server could not create
    /// or remove.
    pub in_dir: bool,
    /// The call (`openat`, `statx`, `execve`, `mkdirat`, ...).
    pub call: &'static str,
    /// What it needed (the most of every refusal of the path).
    pub need: Need,
    /// Why it was refused.
    pub by: RefusedBy,
    /// What it is outside.
    pub outside: Outside,
    /// How many times.
    pub count: u64,
}

#[cfg(test)]
impl Refusal {
    /// A test's refusal: an `openat` of `path` needing `need`, refused
    /// because the path is not in the view, `count` times.
    pub(crate) fn not_in_view(path: &str, need: Need, outside: Outside, count: u64) -> Refusal {
        Refusal {
            path: path.into(),
            asked: None,
            in_dir: false,
            call: "openat",
            need,
            by: RefusedBy::NotInView,
            outside,
            count,
        }
    }
}

impl fmt::Display for Refusal {
    /// `open refused (not in the view), exists outside, a directory`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.need {
            Need::Look => "look",
            Need::Read => "open",
            Need::Exec => "exec",
            Need::Write if self.in_dir => "create or remove in it",
            Need::Write => "write",
        };
        write!(
            f,
            "{what} refused ({}), exists outside, {} ({})",
            self.by, self.outside.kind, self.call
        )?;
        if let Some(a) = &self.asked {
            // The server's own words: quoted, escaped.
            write!(f, ", asked as {:?}", a.display().to_string())?;
        }
        Ok(())
    }
}

/// What observing a server saw so far.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Observed {
    /// The paths the sandbox refused it ([`Record::refusals`]).
    pub refusals: Vec<Refusal>,
    /// Refusals of paths past the record's bound ([`Record::dropped`]).
    pub dropped: u64,
    /// Calls naming a path it made (refused or not).
    pub calls: u64,
}

/// The refusals seen of one server: each path once (with the most it
/// needed), at most [`MAX_PATHS`] paths; refusals of further paths are
/// counted, not kept.
#[derive(Debug, Clone, Default)]
pub struct Record {
    paths: BTreeMap<PathBuf, Refusal>,
    dropped: u64,
}

impl Record {
    /// Add a refusal; the refusal as kept when it is news (a path not seen
    /// before, or seen needing less).
    pub fn add(&mut self, r: Refusal) -> Option<&Refusal> {
        if self.paths.contains_key(&r.path) {
            let seen = self.paths.get_mut(&r.path)?;
            seen.count += 1;
            if r.need > seen.need {
                let count = seen.count;
                *seen = Refusal { count, ..r };
                return Some(seen);
            }
            return None;
        }
        if self.paths.len() >= MAX_PATHS {
            self.dropped += 1;
            return None;
        }
        let path = r.path.clone();
        Some(self.paths.entry(path).or_insert(Refusal { count: 1, ..r }))
    }

    /// The refusals kept, by path.
    pub fn refusals(&self) -> Vec<Refusal> {
        self.paths.values().cloned().collect()
    }

    /// Refusals of paths past [`MAX_PATHS`], not kept.
    pub fn dropped(&self) -> u64 {
        self.dropped
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sandbox(view: bool) -> Sandbox {
        Sandbox {
            view,
            landlock: true,
            grants: vec![
                ("/usr".into(), Rights::RX),
                ("/srv/data".into(), Rights::R),
                ("/srv/data/logs".into(), Rights::RW),
            ],
            tcp_connect: None,
        }
    }

    const HERE: Option<InView> = Some(InView::Present {
        read_only: false,
        noexec: false,
    });

    #[test]
    fn the_view_refuses_what_is_not_in_it_even_a_look() {
        let s = sandbox(true);
        let p = Path::new("/home/u/.fakepm/cache");
        for need in [Need::Look, Need::Read, Need::Write, Need::Exec] {
            assert_eq!(
                judge(&s, need, p, Some(InView::Missing)),
                Some(RefusedBy::NotInView)
            );
        }
        // Not looked up there: nothing is said.
        assert_eq!(judge(&s, Need::Read, p, None), None);
        let ro = Some(InView::Present {
            read_only: true,
            noexec: true,
        });
        assert_eq!(
            judge(&s, Need::Write, Path::new("/srv/data/x"), ro),
            Some(RefusedBy::ReadOnlyInView)
        );
        assert_eq!(
            judge(&s, Need::Exec, Path::new("/srv/data/x"), ro),
            Some(RefusedBy::NoExecInView)
        );
        assert_eq!(judge(&s, Need::Read, Path::new("/srv/data/x"), ro), None);
    }

    #[test]
    fn landlock_refuses_opens_not_looks() {
        let s = sandbox(false);
        let out = Path::new("/home/u/.config/realtool/config.toml");
        assert_eq!(judge(&s, Need::Look, out, None), None);
        assert_eq!(
            judge(&s, Need::Read, out, None),
            Some(RefusedBy::NotGranted)
        );
        assert_eq!(judge(&s, Need::Read, Path::new("/usr/lib/x"), None), None);
        assert_eq!(
            judge(&s, Need::Write, Path::new("/usr/lib/x"), None),
            Some(RefusedBy::GrantedLess)
        );
        // Rules add up down the tree.
        assert_eq!(
            judge(&s, Need::Write, Path::new("/srv/data/logs/a"), None),
            None
        );
        assert_eq!(
            judge(&s, Need::Exec, Path::new("/srv/data/logs/a"), None),
            Some(RefusedBy::GrantedLess)
        );
        // Not a prefix by bytes: by components.
        assert_eq!(
            judge(&s, Need::Read, Path::new("/srv/database"), None),
            Some(RefusedBy::NotGranted)
        );
        // In the view, and granted: Landlock still decides.
        let v = sandbox(true);
        assert_eq!(judge(&v, Need::Read, Path::new("/srv/data/x"), HERE), None);
        assert_eq!(
            judge(&v, Need::Write, Path::new("/srv/data/x"), HERE),
            Some(RefusedBy::GrantedLess)
        );
        // No Landlock (the view and seccomp confine): the view alone.
        let none = Sandbox {
            landlock: false,
            ..sandbox(true)
        };
        assert_eq!(judge(&none, Need::Write, Path::new("/srv/x"), HERE), None);
    }

    fn refusal(path: &str, need: Need) -> Refusal {
        let root_dir = Outside {
            kind: Kind::Dir,
            uid: 0,
        };
        Refusal::not_in_view(path, need, root_dir, 0)
    }

    #[test]
    fn the_record_keeps_each_path_once_with_the_most_it_needed() {
        let mut r = Record::default();
        r.add(refusal("/a", Need::Look));
        r.add(refusal("/a", Need::Write));
        r.add(refusal("/a", Need::Read));
        let got = r.refusals();
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].need, got[0].count), (Need::Write, 3));
        assert_eq!(
            got[0].to_string(),
            "write refused (not in the view), exists outside, a directory (openat)"
        );
    }

    #[test]
    fn the_record_is_bounded_and_counts_what_it_drops() {
        let mut r = Record::default();
        for i in 0..MAX_PATHS + 10 {
            r.add(refusal(&format!("/p/{i}"), Need::Read));
        }
        // A path already kept is still counted.
        r.add(refusal("/p/0", Need::Read));
        assert_eq!(r.refusals().len(), MAX_PATHS);
        assert_eq!(r.dropped(), 10);
        assert_eq!(r.refusals()[0].count, 2);
    }
}
