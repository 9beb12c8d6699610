//! What a `PATH` directory holds, looked at once and remembered.
//!
//! The toolchain rule needs each program of each `PATH` directory: where
//! its links lead, and the interpreter its `#!` line names. That is a
//! `stat`, and an `open` and a `read` of each program, at every launch: the
//! plan's cost grew with what the user's `PATH` holds. So the listing of
//! each directory is kept in rootfence's state
//! (`$XDG_STATE_HOME/rootfence/path-dirs/`, `~/.local/state/...` without
//! it), with the directory's identity and times, and used again while the
//! directory is unchanged: one `stat` a directory.
//!
//! # Security
//!
//! A listing is the user's: rootfence writes it, from the user's own
//! `PATH`, in a directory no server may write (the state directory is not
//! a grant; a server's store is below it, in its own `servers/ID`). It is
//! used only while the directory's device, inode, modification and change
//! times are the ones recorded, and never when they were within
//! [`RACY`] of the look (a change in the same tick would not show).
//! What it cannot see: a program rewritten in place with another `#!`
//! line (the directory does not change). Its new interpreter is then not
//! granted until the directory changes, and the refusal is observed and
//! said (`rootfence run`, `learn`).

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde::{Deserialize, Serialize};

/// A listing made less than this after the directory last changed is not
/// kept: a change in the same tick of its clock would not show. (Two
/// seconds where the filesystem keeps whole seconds.)
pub const RACY: Duration = Duration::from_millis(100);

/// Most bytes of one kept listing read (a directory of 2048 programs).
const MAX_BYTES: u64 = 4 << 20;

/// A program in a `PATH` directory: the entry, the file it is (the entry
/// itself, or where its links lead), and the interpreter its `#!` line
/// names, as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Program {
    /// The entry.
    pub path: PathBuf,
    /// The file it is.
    pub target: PathBuf,
    /// The interpreter its `#!` line names, if it has one.
    pub interp: Option<String>,
}

/// What a `PATH` directory holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listing {
    /// Its programs: executable files, and links to them.
    pub programs: Vec<Program>,
    /// Whether it holds nothing but programs and symbolic links (no other
    /// file, no directory), so that granting it grants programs only.
    pub only_programs: bool,
    /// Whether it held more entries than were looked at.
    pub truncated: bool,
}

/// A listing as kept: the directory and what identified it then.
#[derive(Debug, Serialize, Deserialize)]
struct Kept {
    dir: PathBuf,
    stamp: Stamp,
    listing: Listing,
}

/// A directory's identity and times.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Stamp {
    dev: u64,
    ino: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(dir: &Path) -> Option<Stamp> {
        let m = std::fs::metadata(dir).ok()?;
        Some(Stamp {
            dev: m.dev(),
            ino: m.ino(),
            mtime: (m.mtime(), m.mtime_nsec()),
            ctime: (m.ctime(), m.ctime_nsec()),
        })
    }

    /// Whether the directory changed within [`RACY`] of now.
    fn racy(&self) -> bool {
        let (s, ns) = self.mtime.max(self.ctime);
        let Ok(secs) = u64::try_from(s) else {
            return true;
        };
        let changed = SystemTime::UNIX_EPOCH
            + Duration::from_secs(secs)
            + Duration::from_nanos(u64::try_from(ns).unwrap_or(0));
        let racy = if self.mtime.1 == 0 && self.ctime.1 == 0 {
            Duration::from_secs(2)
        } else {
            RACY
        };
        SystemTime::now()
            .duration_since(changed)
            .map_or(true, |age| age < racy)
    }
}

/// The listing of the `PATH` directory `dir` (canonical): the one kept
/// while the directory is unchanged, else `look(dir)`, kept for next time.
/// `state`: the directory of kept listings (`None`: nothing is kept).
pub fn listing(dir: &Path, state: Option<&Path>, look: impl Fn(&Path) -> Listing) -> Listing {
    let Some(stamp) = Stamp::of(dir) else {
        return look(dir);
    };
    let file = state.map(|s| s.join(file_name(dir)));
    if let Some(kept) = file.as_deref().and_then(read)
        && kept.dir == dir
        && kept.stamp == stamp
    {
        return kept.listing;
    }
    let listing = look(dir);
    // Kept only if the directory did not change while it was looked at,
    // nor just before.
    if let Some(file) = file
        && Stamp::of(dir) == Some(stamp)
        && !stamp.racy()
    {
        let kept = Kept {
            dir: dir.to_path_buf(),
            stamp,
            listing,
        };
        if let Err(e) = write(&file, &kept) {
            tracing::debug!("cannot keep the listing of {}: {e}", dir.display());
        }
        return kept.listing;
    }
    listing
}

/// Where listings are kept for a user whose environment is `env`.
pub fn state_dir(env: &crate::hostenv::HostEnv) -> Option<PathBuf> {
    Some(
        env.xdg("XDG_STATE_HOME", ".local/state")?
            .join("rootfence/path-dirs"),
    )
}

fn file_name(dir: &Path) -> String {
    use std::hash::Hasher;
    let mut h = siphasher::sip::SipHasher13::new_with_keys(0x7061_7468, 0x6469_7273);
    h.write(dir.as_os_str().as_encoded_bytes());
    format!("{:016x}.json", h.finish())
}

fn read(file: &Path) -> Option<Kept> {
    serde_json::from_slice(&crate::statefile::read_whole(file, MAX_BYTES)?).ok()
}

/// Write `kept` to `file`, whole or not at all.
fn write(file: &Path, kept: &Kept) -> std::io::Result<()> {
    crate::statefile::write_whole(file, &serde_json::to_vec(kept).map_err(std::io::Error::other)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    fn old(path: &Path) {
        let t = SystemTime::now() - Duration::from_secs(60);
        let f = std::fs::File::open(path).unwrap();
        f.set_times(std::fs::FileTimes::new().set_modified(t))
            .unwrap();
    }

    #[test]
    fn a_listing_is_looked_at_again_only_when_its_directory_changed() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("bin");
        let state = tmp.path().join("state");
        std::fs::create_dir(&dir).unwrap();
        std::fs::write(dir.join("a"), "#!/bin/sh\n").unwrap();
        let looks = Cell::new(0);
        let look = |d: &Path| {
            looks.set(looks.get() + 1);
            Listing {
                programs: std::fs::read_dir(d)
                    .unwrap()
                    .flatten()
                    .map(|e| Program {
                        path: e.path(),
                        target: e.path(),
                        interp: Some("/bin/sh".into()),
                    })
                    .collect(),
                only_programs: true,
                truncated: false,
            }
        };
        // Just changed: looked at each time, not kept (its ctime is now).
        let first = listing(&dir, Some(&state), look);
        let again = listing(&dir, Some(&state), look);
        assert_eq!(first, again);
        assert_eq!(looks.get(), 2, "a racy directory is not kept");
        assert!(!state.exists() || std::fs::read_dir(&state).unwrap().next().is_none());

        // A kept listing is used while the stamp holds.
        let stamp = Stamp::of(&dir).unwrap();
        let kept = Kept {
            dir: dir.clone(),
            stamp,
            listing: first.clone(),
        };
        write(&state.join(file_name(&dir)), &kept).unwrap();
        looks.set(0);
        assert_eq!(listing(&dir, Some(&state), look), first);
        assert_eq!(looks.get(), 0, "the kept listing is used");

        // A new program changes the directory: looked at again.
        std::fs::write(dir.join("b"), "#!/bin/sh\n").unwrap();
        old(&dir);
        let after = listing(&dir, Some(&state), look);
        assert_eq!(looks.get(), 1);
        assert_eq!(after.programs.len(), 2);

        // Another directory's listing under the same file is not used.
        let other = tmp.path().join("other");
        std::fs::create_dir(&other).unwrap();
        let forged = Kept {
            dir: other,
            stamp: Stamp::of(&dir).unwrap(),
            listing: Listing {
                programs: vec![],
                only_programs: true,
                truncated: false,
            },
        };
        write(&state.join(file_name(&dir)), &forged).unwrap();
        looks.set(0);
        assert_eq!(listing(&dir, Some(&state), look).programs.len(), 2);
        assert_eq!(looks.get(), 1);
    }

    #[test]
    fn a_directory_changed_a_minute_ago_is_not_racy() {
        let tmp = tempfile::tempdir().unwrap();
        let s = Stamp {
            dev: 1,
            ino: 1,
            mtime: (1, 0),
            ctime: (1, 0),
        };
        assert!(!s.racy());
        let now = SystemTime::now()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let s = Stamp {
            mtime: (now, 0),
            ..s
        };
        assert!(s.racy());
        drop(tmp);
    }
}
