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

/// Most places kept: past it, the oldest are forgotten.
const MAX_PLACES: usize = 1024;

/// `now` (the places the server may write, canonical) and every place a
/// server was let write before, remembering those of `now` not yet on the
/// record.
///
/// # Security
///
/// The record is read only where no place of `now` holds it (a server
/// able to write it could make rootfence forget).
pub fn with_remembered(env: &HostEnv, now: &[PathBuf]) -> Vec<PathBuf> {
    let Some(file) = record(env) else {
        return now.to_vec();
    };
    let real = crate::canon::canonicalize(file.parent().unwrap_or(&file))
        .unwrap_or_else(|_| file.clone());
    if now
        .iter()
        .any(|w| file.starts_with(w) || real.starts_with(w))
    {
        return now.to_vec();
    }
    let mut places = read(&file);
    let new: Vec<&PathBuf> = now
        .iter()
        .filter(|p| !places.iter().any(|k| p.starts_with(k)))
        .collect();
    if !new.is_empty() {
        places.retain(|k| !new.iter().any(|p| k.starts_with(p)));
        places.extend(new.into_iter().cloned());
        if places.len() > MAX_PLACES {
            places.drain(..places.len() - MAX_PLACES);
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
    fn a_record_the_server_may_write_is_not_read() {
        let tmp = tempfile::tempdir().unwrap();
        let home = std::fs::canonicalize(tmp.path()).unwrap();
        let env = HostEnv {
            home: Some(home.clone()),
            ..HostEnv::default()
        };
        with_remembered(&env, &[PathBuf::from("/srv/a")]);
        let state = home.join(".local/state");
        assert_eq!(with_remembered(&env, std::slice::from_ref(&state)), vec![state]);
    }
}
