//! Canonical paths with each prefix resolved once per plan.
//!
//! Planning a launch canonicalizes the same ancestors again and again (the
//! home directory under every deny rule, cache and toolchain path; `/usr`
//! under every library). [`canonicalize`] is `std::fs::canonicalize` (the
//! same answer: every symbolic link followed, `..` taken physically); while
//! a [`Memo`] is held on the thread, every existing prefix it resolved is
//! remembered, so each is read from the kernel once.
//!
//! Only prefixes that exist are remembered (a missing one is asked again:
//! the plan may create it), and only while the memo is held: a session's
//! next plan starts from the filesystem as it is then.

use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::OsString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Component, Path, PathBuf};

/// Symbolic links followed in one resolution at most (the kernel's
/// `MAXSYMLINKS`).
const MAX_LINKS: u32 = 40;

thread_local! {
    /// The canonical name of each resolved prefix (a canonical directory
    /// joined with one name), while a memo is held.
    static MEMO: RefCell<Option<HashMap<PathBuf, PathBuf>>> = const { RefCell::new(None) };
}

/// While held, [`canonicalize`] on this thread remembers what it resolved.
/// Nested memos share the outermost one.
#[must_use = "the memo holds only while it is kept"]
pub struct Memo {
    owner: bool,
}

impl Memo {
    /// Start remembering on this thread (or join the memo already held).
    pub fn hold() -> Memo {
        let owner = MEMO.with(|m| {
            let mut m = m.borrow_mut();
            let fresh = m.is_none();
            if fresh {
                *m = Some(HashMap::new());
            }
            fresh
        });
        Memo { owner }
    }
}

impl Drop for Memo {
    fn drop(&mut self) {
        if self.owner {
            MEMO.with(|m| *m.borrow_mut() = None);
        }
    }
}

/// `path` with every symbolic link followed and `.` and `..` taken, as
/// `std::fs::canonicalize` (`realpath`) answers; through this thread's
/// [`Memo`] when one is held.
pub fn canonicalize(path: impl AsRef<Path>) -> io::Result<PathBuf> {
    let path = path.as_ref();
    let held = MEMO.with(|m| m.borrow().is_some());
    // A trailing slash asks for a directory: left to the kernel.
    let bytes = path.as_os_str().as_bytes();
    if !held || (bytes.len() > 1 && bytes.ends_with(b"/")) {
        return std::fs::canonicalize(path);
    }
    if bytes.is_empty() {
        return Err(io::ErrorKind::NotFound.into());
    }
    let base = if path.is_absolute() {
        PathBuf::from("/")
    } else {
        std::env::current_dir()?
    };
    let mut links = 0;
    resolve(base, path, &mut links, &mut None)
}

/// `path` resolved from the canonical directory `from`; with `holders`,
/// past the memo, noting the directory of each link met.
fn resolve(
    from: PathBuf,
    path: &Path,
    links: &mut u32,
    holders: &mut Option<&mut Vec<PathBuf>>,
) -> io::Result<PathBuf> {
    let mut cur = from;
    for c in path.components() {
        match c {
            Component::RootDir => cur = PathBuf::from("/"),
            Component::CurDir | Component::Prefix(_) => {}
            Component::ParentDir => {
                // `..` of what is not a directory is refused, as the
                // kernel refuses it.
                if cur.parent().is_some() && !cur.is_dir() {
                    return Err(io::Error::from_raw_os_error(libc::ENOTDIR));
                }
                cur.pop();
            }
            Component::Normal(name) => cur = step(&cur, name.to_os_string(), links, holders)?,
        }
    }
    Ok(cur)
}

/// The canonical name of `name` in the canonical directory `dir`.
fn step(
    dir: &Path,
    name: OsString,
    links: &mut u32,
    holders: &mut Option<&mut Vec<PathBuf>>,
) -> io::Result<PathBuf> {
    let candidate = dir.join(&name);
    if holders.is_none()
        && let Some(known) =
            MEMO.with(|m| m.borrow().as_ref().and_then(|m| m.get(&candidate).cloned()))
    {
        return Ok(known);
    }
    let resolved = match std::fs::read_link(&candidate) {
        Ok(target) => {
            *links += 1;
            if *links > MAX_LINKS {
                return Err(io::Error::from_raw_os_error(libc::ELOOP));
            }
            if let Some(h) = holders.as_deref_mut() {
                h.push(dir.to_path_buf());
            }
            resolve(dir.to_path_buf(), &target, links, holders)?
        }
        // It exists and is not a link.
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => candidate.clone(),
        Err(e) => return Err(e),
    };
    MEMO.with(|m| {
        if let Some(m) = m.borrow_mut().as_mut() {
            m.insert(candidate, resolved.clone());
        }
    });
    Ok(resolved)
}

/// The directories holding each symbolic link met resolving `path` (each
/// canonical, in the order met): the places that decided where the path
/// leads. Empty for a path without links (or one that cannot be read
/// past a link loop).
pub fn link_holders(path: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let base = if path.is_absolute() {
        PathBuf::from("/")
    } else {
        match std::env::current_dir() {
            Ok(d) => d,
            Err(_) => return out,
        }
    };
    let mut links = 0;
    let _ = resolve(base, path, &mut links, &mut Some(&mut out));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    #[test]
    fn with_a_memo_the_answers_are_the_kernels() {
        let t = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(t.path()).unwrap();
        std::fs::create_dir_all(base.join("a/b/c")).unwrap();
        std::fs::write(base.join("a/b/file"), "x").unwrap();
        symlink(base.join("a/b"), base.join("abs")).unwrap();
        symlink("a/b/c", base.join("rel")).unwrap();
        symlink("../..", base.join("a/b/c/up")).unwrap();
        symlink("loop2", base.join("loop1")).unwrap();
        symlink("loop1", base.join("loop2")).unwrap();
        symlink("missing", base.join("dangling")).unwrap();
        let cases = [
            "a/b/c",
            "abs/c",
            "abs/../b",
            "rel/up",
            "rel/up/b/c/up/abs/file",
            "rel/../c/./up",
            "abs/file",
            "abs/file/x",
            "abs/file/..",
            "loop1",
            "dangling",
            "missing/x",
            "a/b/../../a",
        ];
        let _memo = Memo::hold();
        for round in 0..2 {
            for c in cases {
                let p = base.join(c);
                let want = std::fs::canonicalize(&p).map_err(|e| e.raw_os_error());
                let got = canonicalize(&p).map_err(|e| e.raw_os_error());
                assert_eq!(got, want, "{c} (round {round})");
            }
        }
        assert_eq!(canonicalize(Path::new("/")).unwrap(), Path::new("/"));
    }

    #[test]
    fn the_holders_of_every_link_met_are_named() {
        let t = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(t.path()).unwrap();
        std::fs::create_dir_all(base.join("w/real/bin")).unwrap();
        std::fs::create_dir_all(base.join("elsewhere/bin")).unwrap();
        std::fs::write(base.join("elsewhere/bin/python"), "").unwrap();
        // A directory link in w, then a file link in elsewhere.
        symlink(base.join("elsewhere"), base.join("w/venv")).unwrap();
        symlink("../../w/real/bin", base.join("elsewhere/bin/up")).unwrap();
        assert_eq!(
            link_holders(&base.join("w/real/bin")),
            Vec::<PathBuf>::new()
        );
        assert_eq!(
            link_holders(&base.join("w/venv/bin/python")),
            vec![base.join("w")]
        );
        assert_eq!(
            link_holders(&base.join("w/venv/bin/up")),
            vec![base.join("w"), base.join("elsewhere/bin")]
        );
    }

    #[test]
    fn a_missing_prefix_is_asked_again_and_the_memo_ends_with_its_holder() {
        let t = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(t.path()).unwrap();
        let memo = Memo::hold();
        assert!(canonicalize(base.join("later")).is_err());
        std::fs::create_dir(base.join("later")).unwrap();
        assert_eq!(
            canonicalize(base.join("later")).unwrap(),
            base.join("later")
        );
        {
            let _inner = Memo::hold();
        }
        assert!(
            MEMO.with(|m| m.borrow().is_some()),
            "the inner memo ended it"
        );
        drop(memo);
        assert!(MEMO.with(|m| m.borrow().is_none()));
    }
}
