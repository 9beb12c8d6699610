//! Remembered `initialize` answers: what a previous run of the same server
//! command answered to the same `initialize`, so that a session whose roots
//! come from the host starts one server, not two.
//!
//! Without it, the host's `initialize` needs a server (launched before the
//! host's roots are known, so with none of them), and the host's roots,
//! asked after `notifications/initialized`, need another: the first
//! `tools/list` waits for two starts. With a remembered answer, rootfence
//! answers `initialize` itself, asks the host for its roots, and launches
//! once, under those roots; that server is sent the same `initialize`
//! (replayed, as after a rebuild), and when its answer differs from the
//! remembered one, the entry is replaced (the host keeps the answer it got;
//! the lists it sees come from the real server).
//!
//! An entry is used only when the `initialize` rootfence would send now is
//! the remembered one, byte for byte as JSON (host capabilities, protocol
//! revision, client information, what the policy withholds). Entries are
//! keyed by the command line, the working directory, the environment and
//! the identity (size, modification time, inode) of every file the
//! command line names, so an edited script or a new binary is a miss.
//!
//! Stored under `$XDG_CACHE_HOME/rootfence/initialize/` (default
//! `~/.cache/rootfence/initialize/`), one small JSON file per command,
//! written through a directory handle ([`cap_std`]): a symlink a server
//! could plant there never leads outside that base directory, files are
//! replaced by rename, and a file read is at most [`MAX_ENTRY`] bytes.

use std::ffi::OsString;
use std::hash::{Hash, Hasher};
use std::io::{Read, Write};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use cap_std::ambient_authority;
use cap_std::fs::{Dir, OpenOptions};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::runtime::HostEnv;

/// Largest entry read (an `initialize` answer with long instructions fits).
pub const MAX_ENTRY: u64 = 1 << 20;

/// Where entries live, under the base cache directory.
const SUBDIR: &str = "rootfence/initialize";

/// One remembered handshake: what the server was sent and what it
/// answered.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RememberedInit {
    /// The `initialize` params the server was sent.
    pub params: Value,
    /// Its `initialize` result.
    pub result: Value,
}

/// The entry of one server command.
#[derive(Debug, Clone)]
pub struct InitCache {
    base: PathBuf,
    file: String,
}

impl InitCache {
    /// The entry for `command` run with `env`; `None` without a cache
    /// directory (no `XDG_CACHE_HOME` and no home).
    pub fn for_command(env: &HostEnv, command: &[OsString]) -> Option<InitCache> {
        let base = match env.vars.get("XDG_CACHE_HOME") {
            Some(x) if Path::new(x).is_absolute() => PathBuf::from(x),
            _ => env.home.as_ref()?.join(".cache"),
        };
        Some(InitCache {
            base,
            file: format!("{:016x}.json", key(env, command)),
        })
    }

    /// The entry's path (for logs and tests).
    pub fn path(&self) -> PathBuf {
        self.base.join(SUBDIR).join(&self.file)
    }

    /// The remembered handshake, if there is a readable one.
    pub fn load(&self) -> Option<RememberedInit> {
        let base = Dir::open_ambient_dir(&self.base, ambient_authority()).ok()?;
        let dir = base.open_dir(SUBDIR).ok()?;
        let mut opts = OpenOptions::new();
        opts.read(true);
        let f = dir.open_with(&self.file, &opts).ok()?;
        if !f.metadata().ok()?.is_file() {
            return None;
        }
        let mut text = String::new();
        f.take(MAX_ENTRY).read_to_string(&mut text).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// Remember `init` (replacing the entry).
    pub fn store(&self, init: &RememberedInit) -> std::io::Result<()> {
        std::fs::create_dir_all(&self.base)?;
        let base = Dir::open_ambient_dir(&self.base, ambient_authority())?;
        base.create_dir_all(SUBDIR)?;
        let dir = base.open_dir(SUBDIR)?;
        let text = serde_json::to_vec(init).map_err(std::io::Error::other)?;
        let tmp = format!("{}.{}.tmp", self.file, std::process::id());
        let mut opts = OpenOptions::new();
        opts.write(true).create_new(true);
        let mut f = dir.open_with(&tmp, &opts)?;
        let written = f.write_all(&text).and_then(|()| f.sync_data());
        drop(f);
        if let Err(e) = written.and_then(|()| dir.rename(&tmp, &dir, &self.file)) {
            let _ = dir.remove_file(&tmp);
            return Err(e);
        }
        Ok(())
    }
}

/// The key of a command's entry: the command line, the working directory,
/// the environment, and the identity of each file the command line names
/// (as a path, or its first word found on `PATH`).
fn key(env: &HostEnv, command: &[OsString]) -> u64 {
    // SipHash with fixed keys: stable for a build of rootfence, which is
    // all a cache needs (the version is part of the key too).
    #[allow(deprecated)]
    let mut h = std::hash::SipHasher::new();
    env!("CARGO_PKG_VERSION").hash(&mut h);
    for arg in command {
        arg.as_bytes().hash(&mut h);
    }
    env.cwd.hash(&mut h);
    env.vars.hash(&mut h);
    let path_dirs: Vec<PathBuf> = env
        .vars
        .get("PATH")
        .map(|p| std::env::split_paths(p).collect())
        .unwrap_or_default();
    for (i, arg) in command.iter().enumerate() {
        let p = Path::new(arg);
        let mut candidates = Vec::new();
        if p.is_absolute() {
            candidates.push(p.to_path_buf());
        } else if let Some(cwd) = &env.cwd {
            candidates.push(cwd.join(p));
        }
        if i == 0 && !arg.as_bytes().contains(&b'/') {
            candidates.extend(path_dirs.iter().map(|d| d.join(p)));
        }
        if let Some(m) = candidates
            .iter()
            .find_map(|c| std::fs::metadata(c).ok().filter(|m| m.is_file()))
        {
            (i, m.len(), m.mtime(), m.mtime_nsec(), m.ino(), m.dev()).hash(&mut h);
        }
    }
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_in(dir: &Path) -> HostEnv {
        let mut env = HostEnv::default();
        env.vars
            .insert("XDG_CACHE_HOME".into(), dir.display().to_string());
        env.vars.insert("PATH".into(), "/usr/bin:/bin".into());
        env.cwd = Some(dir.to_path_buf());
        env
    }

    fn entry() -> RememberedInit {
        RememberedInit {
            params: serde_json::json!({"protocolVersion": "2025-06-18"}),
            result: serde_json::json!({"serverInfo": {"name": "s"}}),
        }
    }

    #[test]
    fn an_entry_is_stored_and_loaded_for_the_same_command_only() {
        let tmp = tempfile::tempdir().unwrap();
        let env = env_in(tmp.path());
        let cmd = |s: &str| vec![OsString::from("sh"), OsString::from(s)];
        let c = InitCache::for_command(&env, &cmd("a")).unwrap();
        assert_eq!(c.load(), None);
        c.store(&entry()).unwrap();
        assert_eq!(c.load(), Some(entry()));
        let other = InitCache::for_command(&env, &cmd("b")).unwrap();
        assert_ne!(other.path(), c.path());
        assert_eq!(other.load(), None);
        // Another environment is another entry.
        let mut env2 = env.clone();
        env2.vars.insert("X".into(), "1".into());
        assert_ne!(
            InitCache::for_command(&env2, &cmd("a")).unwrap().path(),
            c.path()
        );
    }

    #[test]
    fn an_edited_script_is_a_miss() {
        let tmp = tempfile::tempdir().unwrap();
        let env = env_in(tmp.path());
        let script = tmp.path().join("server.py");
        std::fs::write(&script, "print(1)").unwrap();
        let cmd = vec![OsString::from("python3"), script.clone().into_os_string()];
        let before = InitCache::for_command(&env, &cmd).unwrap().path();
        std::fs::write(&script, "print(22)").unwrap();
        let after = InitCache::for_command(&env, &cmd).unwrap().path();
        assert_ne!(before, after);
    }

    #[test]
    fn a_symlink_planted_in_the_cache_never_leads_outside_it() {
        let tmp = tempfile::tempdir().unwrap();
        let cache = tmp.path().join("cache");
        let outside = tmp.path().join("outside");
        std::fs::create_dir_all(cache.join("rootfence")).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        // The entries' directory replaced by a link to elsewhere.
        std::os::unix::fs::symlink(&outside, cache.join(SUBDIR)).unwrap();
        let env = env_in(&cache);
        let c = InitCache::for_command(&env, &[OsString::from("x")]).unwrap();
        assert!(c.store(&entry()).is_err());
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
        // An entry file that is a link to a file outside is not read.
        std::fs::remove_file(cache.join(SUBDIR)).unwrap();
        std::fs::create_dir_all(cache.join(SUBDIR)).unwrap();
        let secret = outside.join("entry.json");
        std::fs::write(&secret, serde_json::to_vec(&entry()).unwrap()).unwrap();
        std::os::unix::fs::symlink(&secret, c.path()).unwrap();
        assert_eq!(c.load(), None);
        // Storing replaces the link, and leaves the file it pointed to.
        let mut e = entry();
        e.result = serde_json::json!({"serverInfo": {"name": "new"}});
        c.store(&e).unwrap();
        assert_eq!(c.load(), Some(e));
        assert_eq!(
            serde_json::from_slice::<RememberedInit>(&std::fs::read(&secret).unwrap()).unwrap(),
            entry()
        );
    }

    #[test]
    fn an_oversized_or_garbled_entry_is_a_miss() {
        let tmp = tempfile::tempdir().unwrap();
        let env = env_in(tmp.path());
        let c = InitCache::for_command(&env, &[OsString::from("x")]).unwrap();
        c.store(&entry()).unwrap();
        std::fs::write(c.path(), "{not json").unwrap();
        assert_eq!(c.load(), None);
        let big = format!(
            "{{\"params\":{{}},\"result\":{{\"x\":\"{}\"}}}}",
            "a".repeat(MAX_ENTRY as usize)
        );
        std::fs::write(c.path(), big).unwrap();
        assert_eq!(c.load(), None);
    }
}
