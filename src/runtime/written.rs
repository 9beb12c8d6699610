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
/// server was let write before, as the record says.
pub fn remembered(env: &HostEnv, now: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = now.to_vec();
    if let Some(file) = record_file(env) {
        out.extend(read(&file));
    }
    out.sort();
    out.dedup();
    out
}

/// Add `places` (a launch's writable roots and write paths, canonical) to
/// the record at `file`.
///
/// # Security
///
/// Only a launch adds places: what rootfence let a server write, never
/// what a root refused or a plan only shown named. The record lies in
/// rootfence's state directory, which no server is granted (a root holding
/// it is refused). It is read, merged and written under a lock, so
/// launches at once add to it rather than replace each other's places.
pub fn remember(file: &Path, places: &[PathBuf]) {
    let _lock = lock(file);
    let mut kept = read(file);
    let new: Vec<&PathBuf> = places
        .iter()
        .filter(|p| !kept.iter().any(|k| p.starts_with(k)))
        .collect();
    if new.is_empty() {
        return;
    }
    kept.retain(|k| !new.iter().any(|p| k.starts_with(p)));
    kept.extend(new.into_iter().cloned());
    if kept.len() > MAX_PLACES {
        kept.retain(|p| std::fs::symlink_metadata(p).is_ok());
    }
    let mut bytes = Vec::new();
    for p in &kept {
        bytes.extend_from_slice(p.as_os_str().as_bytes());
        bytes.push(0);
    }
    if let Err(e) = crate::statefile::write_whole(file, &bytes) {
        tracing::warn!(
            "cannot remember where servers may write in {}: {e}",
            file.display()
        );
    }
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

/// The record's file: `$XDG_STATE_HOME/rootfence/written`.
pub fn record_file(env: &HostEnv) -> Option<PathBuf> {
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

    fn env_in(dir: &Path) -> HostEnv {
        HostEnv {
            home: Some(dir.to_path_buf()),
            ..HostEnv::default()
        }
    }

    #[test]
    fn a_place_once_writable_is_remembered_and_its_inner_places_fold_into_it() {
        let tmp = tempfile::tempdir().unwrap();
        let env = env_in(tmp.path());
        let file = record_file(&env).unwrap();
        let a = PathBuf::from("/srv/a/inner");
        let b = PathBuf::from("/srv/b");
        remember(&file, std::slice::from_ref(&a));
        assert_eq!(remembered(&env, &[]), vec![a.clone()]);
        remember(&file, std::slice::from_ref(&b));
        assert_eq!(remembered(&env, &[]), vec![a, b.clone()]);
        // A place holding a remembered one takes its place.
        let outer = PathBuf::from("/srv/a");
        remember(&file, std::slice::from_ref(&outer));
        let now = PathBuf::from("/srv/now");
        assert_eq!(remembered(&env, std::slice::from_ref(&now)), vec![outer, b, now]);
    }

    #[test]
    fn launches_at_once_each_add_their_place() {
        let tmp = tempfile::tempdir().unwrap();
        let env = env_in(tmp.path());
        let file = record_file(&env).unwrap();
        std::thread::scope(|s| {
            for i in 0..24 {
                let file = &file;
                s.spawn(move || remember(file, &[PathBuf::from(format!("/srv/r{i}"))]));
            }
        });
        assert_eq!(remembered(&env, &[]).len(), 24);
    }
}
