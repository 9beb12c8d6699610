//! The places rootfence ever let a server write, remembered.
//!
//! What a server writes outlives its session: a launcher, a link or a
//! configuration it left in a root is still there at the next session,
//! where that root may not be a root yet (`rootfence run` plans first
//! with the roots of its command line and policy, before the host says
//! its own) or not be one at all. So each place a plan lets a server write
//! is added to a record of rootfence's own
//! (`$XDG_STATE_HOME/rootfence/written`), and discovery takes nothing from
//! a place on it, as from one the server may write now.

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::HostEnv;

/// Past this many places, those that are no longer there are forgotten
/// (a place that is there is never forgotten: what a server left in it
/// may still be there).
const MAX_PLACES: usize = 1024;

/// `now` (the places the server may write, canonical) and every place a
/// server was let write before, remembering those of `now` not yet on the
/// record.
///
/// # Security
///
/// The record lies in rootfence's state directory, which no server is
/// granted (a root holding it is refused). It is read, merged and written
/// under a lock, so launches at once add to it rather than replace each
/// other's places.
pub fn with_remembered(env: &HostEnv, now: &[PathBuf]) -> Vec<PathBuf> {
    let Some(file) = record(env) else {
        return now.to_vec();
    };
    let _lock = lock(&file);
    let mut places = read(&file);
    let new: Vec<&PathBuf> = now
        .iter()
        .filter(|p| !places.iter().any(|k| p.starts_with(k)))
        .collect();
    if !new.is_empty() {
        places.retain(|k| !new.iter().any(|p| k.starts_with(p)));
        places.extend(new.into_iter().cloned());
        if places.len() > MAX_PLACES {
            places.retain(|p| std::fs::symlink_metadata(p).is_ok());
        }
        let mut bytes = Vec::new();
        for p in &places {
            bytes.extend_from_slice(p.as_os_str().as_bytes());
            bytes.push(0);
        }
        if let Err(e) = crate::statefile::write_whole(&file, &bytes) {
            tracing::warn!(
                "cannot remember where servers may write in {}: {e}",
                file.display()
            );
        }
    }
    let mut out = now.to_vec();
    out.extend(places);
    out.sort();
    out.dedup();
    out
}

/// An exclusive lock on the record (its `.lock` file beside it), held
/// until dropped; `None` when none can be had (the record is then used
/// unlocked).
fn lock(file: &Path) -> Option<std::fs::File> {
    let dir = file.parent()?;
    std::fs::create_dir_all(dir).ok()?;
    let mut o = std::fs::OpenOptions::new();
    o.create(true).write(true);
    std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
    std::os::unix::fs::OpenOptionsExt::custom_flags(&mut o, libc::O_NOFOLLOW);
    let f = o.open(dir.join("written.lock")).ok()?;
    rustix::fs::flock(&f, rustix::fs::FlockOperation::LockExclusive).ok()?;
    Some(f)
}

/// The record's file.
fn record(env: &HostEnv) -> Option<PathBuf> {
    Some(
        env.xdg("XDG_STATE_HOME", ".local/state")?
            .join("rootfence/written"),
    )
}

/// The places on the record at `file` (none when it cannot be read).
fn read(file: &Path) -> Vec<PathBuf> {
    std::fs::read(file)
        .unwrap_or_default()
        .split(|b| *b == 0)
        .filter(|p| p.first() == Some(&b'/'))
        .map(|p| PathBuf::from(std::ffi::OsStr::from_bytes(p)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_place_once_writable_is_remembered_and_its_inner_places_fold_into_it() {
        let tmp = tempfile::tempdir().unwrap();
        let env = HostEnv {
            home: Some(tmp.path().to_path_buf()),
            ..HostEnv::default()
        };
        let a = PathBuf::from("/srv/a/inner");
        let b = PathBuf::from("/srv/b");
        assert_eq!(with_remembered(&env, std::slice::from_ref(&a)), vec![a.clone()]);
        assert_eq!(
            with_remembered(&env, std::slice::from_ref(&b)),
            vec![a.clone(), b.clone()]
        );
        // A place holding a remembered one takes its place.
        let outer = PathBuf::from("/srv/a");
        with_remembered(&env, std::slice::from_ref(&outer));
        assert_eq!(with_remembered(&env, &[]), vec![outer, b]);
    }

    #[test]
    fn launches_at_once_each_add_their_place() {
        let tmp = tempfile::tempdir().unwrap();
        let env = HostEnv {
            home: Some(tmp.path().to_path_buf()),
            ..HostEnv::default()
        };
        std::thread::scope(|s| {
            for i in 0..24 {
                let env = &env;
                s.spawn(move || with_remembered(env, &[PathBuf::from(format!("/srv/r{i}"))]));
            }
        });
        assert_eq!(with_remembered(&env, &[]).len(), 24);
    }
}
