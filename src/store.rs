//! Each server's own state store: a directory rootfence creates and owns,
//! one per server identity, kept across sessions (as Flatpak keeps
//! `~/.var/app/ID`).
//!
//! What a server writes under its home directory is its state. The store
//! is where that state lives: with namespaces the server's home directory
//! *is* the store's `home/` (bound there in its view, with the grants below
//! the home mounted into it); without them, its XDG directories
//! (`XDG_CONFIG_HOME`, `XDG_DATA_HOME`, `XDG_STATE_HOME`, `XDG_CACHE_HOME`)
//! point into it. Nothing the server writes there is lost at exit, and
//! nothing of the user's own home reaches it: the user's `~/.NAME` is
//! reached only through a policy line the user adds.
//!
//! The identity ([`ServerId`]) is the command as the user's configuration
//! states it (a package runner's package without its version, so an
//! upgrade keeps its state), never what the server reports about itself.
//! Its readable prefix names the store for people; the hash decides.
//!
//! [`ServerId::of`] and [`location`] are pure; [`ensure`] and
//! [`written_since`] touch the filesystem.

use std::ffi::OsString;
use std::hash::Hasher;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::Serialize;

use crate::hostenv::HostEnv;

/// Where the stores are, below rootfence's state directory.
const SERVERS: &str = "rootfence/servers";

/// The directory of a store the server sees as its home.
pub const HOME: &str = "home";

/// A server's identity: `NAME-HASH`, where the hash is of the command as
/// configured.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServerId(String);

impl ServerId {
    /// The identity of the server `argv` starts (as given, after `--`).
    ///
    /// # Security
    ///
    /// The identity is the user's statement (the configured command line),
    /// with versions of packages left out; the readable `name` is only a
    /// label (the hash alone tells stores apart), so a server that calls
    /// itself after another program gets a store of its own, never that
    /// program's directory.
    pub fn of(argv: &[OsString], name: Option<&str>) -> ServerId {
        let mut h = siphasher::sip::SipHasher13::new_with_keys(0x7374_6f72, 0x6520_6964);
        for a in argv {
            let a = a.to_string_lossy();
            h.write(without_version(&a).as_bytes());
            h.write_u8(0);
        }
        let label: String = name
            .unwrap_or("server")
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                    c.to_ascii_lowercase()
                } else {
                    '_'
                }
            })
            .take(40)
            .collect();
        let label = label.trim_start_matches('.');
        let label = if label.is_empty() { "server" } else { label };
        ServerId(format!("{label}-{:016x}", h.finish()))
    }

    /// The identity as text (a file name).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for ServerId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// A package spec without its version: `@scope/name@1.2` → `@scope/name`,
/// `name@latest` → `name`, `npm:name@2` → `npm:name`, `name==1.2` and
/// `name>=1` → `name`. Anything else (paths, URLs, options) as given.
fn without_version(arg: &str) -> &str {
    if arg.starts_with('-') || arg.contains("://") {
        return arg;
    }
    if let Some(i) = arg.find(['=', '<', '>', '~', '!'])
        && i > 0
        && !arg.starts_with('@')
        && !arg[..i].contains('/')
        && ["==", ">=", "<=", "~=", "!="]
            .iter()
            .any(|op| arg[i..].starts_with(op))
    {
        return &arg[..i];
    }
    // npm: the version is after the last '@' that does not start a scope.
    let body_start = if arg.starts_with("npm:") { 4 } else { 0 };
    let body = &arg[body_start..];
    let scoped = body.starts_with('@');
    let Some(at) = body[usize::from(scoped)..]
        .rfind('@')
        .map(|i| i + usize::from(scoped))
    else {
        return arg;
    };
    let version = &body[at + 1..];
    let versionlike = version
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_digit() || matches!(c, '^' | '~' | '*' | '='))
        || (version.starts_with('v') && version[1..].starts_with(|c: char| c.is_ascii_digit()))
        || matches!(
            version,
            "latest" | "next" | "beta" | "alpha" | "canary" | "rc"
        );
    if versionlike && !version.contains('/') && (!scoped || body[..at].contains('/')) {
        &arg[..body_start + at]
    } else {
        arg
    }
}

/// Where the store of `id` is: `$XDG_STATE_HOME/rootfence/servers/ID`, or
/// `~/.local/state/rootfence/servers/ID`. `None` without a home directory.
pub fn location(env: &HostEnv, id: &ServerId) -> Option<PathBuf> {
    let base = env.xdg("XDG_STATE_HOME", ".local/state")?;
    Some(base.join(SERVERS).join(id.as_str()))
}

/// A store made ready for a launch.
#[derive(Debug, Clone)]
pub struct Ready {
    /// The store's `home/`, canonical.
    pub home: PathBuf,
    /// Its (device, inode): what the child must find there.
    pub identity: (u64, u64),
}

/// Why the server's store cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// Making or inspecting a directory failed.
    #[error(transparent)]
    Io(#[from] io::Error),
    /// A directory on the way is a symbolic link, not a directory, or
    /// another user's.
    #[error(
        "{} is not a directory of this user's (remove it; rootfence makes it anew)",
        .0.display()
    )]
    NotOwn(PathBuf),
}

/// Create the store `dir` (and its `home/`) if missing, mode 0700, and
/// check it.
///
/// # Security
///
/// Every directory from rootfence's state directory down is rootfence's
/// own (created here, mode 0700); the store and its `home/` must be real
/// directories owned by this user, never symbolic links, or nothing is
/// used. The server can write only inside `home/`, never the store's
/// directory itself, so it cannot move `home/` elsewhere.
pub fn ensure(dir: &Path) -> Result<Ready, StoreError> {
    let home = dir.join(HOME);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&home)?;
    let me = rustix::process::geteuid().as_raw();
    for d in [dir, home.as_path()] {
        let m = std::fs::symlink_metadata(d)?;
        if !m.is_dir() || m.uid() != me {
            return Err(StoreError::NotOwn(d.to_path_buf()));
        }
        if m.permissions().mode() & 0o077 != 0 {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o700))?;
        }
    }
    let canonical = std::fs::canonicalize(&home)?;
    let m = std::fs::symlink_metadata(&canonical)?;
    Ok(Ready {
        home: canonical,
        identity: (m.dev(), m.ino()),
    })
}

/// What rootfence makes at a place in the server's home when it builds
/// the view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Made {
    /// A directory (on the way to a grant, or its mount point).
    Dir,
    /// A regular file (a copy, or a file grant's mount point).
    File,
    /// A symbolic link (recreated as it is outside).
    Link,
}

/// Clear the way in the store's `home/` for what rootfence makes there
/// (`made`: paths relative to `home`, parents before children): whatever
/// the server left where a directory, file or link of rootfence's goes
/// (a symbolic link on the way, a file where a directory goes) is moved
/// aside to the store's `displaced/`, kept, and returned (from, to).
///
/// # Security
///
/// This is for the server's own sake (a store it filled with obstacles
/// still starts); the view's builder never follows a link in the store
/// either way, so a link that appears after this is refused, not followed.
pub fn clear_way(home: &Path, made: &[(PathBuf, Made)]) -> Vec<(PathBuf, PathBuf)> {
    let mut moved = Vec::new();
    let Some(store) = home.parent() else {
        return moved;
    };
    for (rel, what) in made {
        let mut at = home.to_path_buf();
        let parts: Vec<_> = rel.components().collect();
        for (i, part) in parts.iter().enumerate() {
            at.push(part);
            let Ok(m) = std::fs::symlink_metadata(&at) else {
                break;
            };
            let last = i + 1 == parts.len();
            let fits = match (last, what) {
                (false, _) | (true, Made::Dir) => m.is_dir(),
                (true, Made::File) => m.is_file(),
                (true, Made::Link) => m.file_type().is_symlink(),
            };
            if fits {
                continue;
            }
            let aside = store.join("displaced").join(format!(
                "{}-{}",
                SystemTime::now()
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .map_or(0, |d| d.as_nanos()),
                part.as_os_str().to_string_lossy()
            ));
            let done = std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(store.join("displaced"))
                .and_then(|()| std::fs::rename(&at, &aside));
            match done {
                Ok(()) => moved.push((at.clone(), aside)),
                Err(e) => tracing::debug!("cannot move {} aside: {e}", at.display()),
            }
            break;
        }
    }
    moved
}

/// Most entries of a store looked at when reporting what was written.
const MAX_WALK: usize = 20_000;

/// Most files named in a report.
const MAX_NAMED: usize = 8;

/// What a server wrote in its store's `home/` since `since`: the regular
/// files changed at or after it, relative to `home`, sorted, leaving out
/// `skip` (files rootfence itself put there); at most [`MAX_WALK`] entries
/// are looked at.
pub fn written_since(home: &Path, since: SystemTime, skip: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::new()];
    let mut seen = 0usize;
    while let Some(rel) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(home.join(&rel)) else {
            continue;
        };
        for e in rd.flatten() {
            seen += 1;
            if seen > MAX_WALK {
                out.sort();
                return out;
            }
            let r = rel.join(e.file_name());
            let Ok(m) = e.path().symlink_metadata() else {
                continue;
            };
            if m.is_dir() {
                stack.push(r);
            } else if m.is_file() && m.modified().is_ok_and(|t| t >= since) && !skip.contains(&r) {
                out.push(r);
            }
        }
    }
    out.sort();
    out
}

/// The places of `written` (relative paths) a policy line would name to
/// let the server write the real place instead: the top-level entry, or
/// the entry inside an XDG directory (`.config/NAME`, `.local/share/NAME`).
pub fn places(written: &[PathBuf]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    for w in written {
        let parts: Vec<_> = w.components().map(|c| c.as_os_str()).collect();
        let depth = match parts.first().and_then(|p| p.to_str()) {
            Some(".config" | ".cache") => 2,
            Some(".local") => 3,
            _ => 1,
        };
        let place: PathBuf = parts.iter().take(depth.min(parts.len())).collect();
        if !out.contains(&place) {
            out.push(place);
        }
    }
    out
}

/// A launched server's store, for saying at its end what it wrote there.
#[derive(Debug, Clone)]
pub struct Kept {
    /// The store's `home/`.
    pub home: PathBuf,
    /// When the server was launched.
    pub since: SystemTime,
    /// Files rootfence put there itself (relative).
    pub skip: Vec<PathBuf>,
    /// The user's home directory (for `~/` in the lines shown).
    pub user_home: Option<PathBuf>,
}

impl Kept {
    /// What the server wrote in its store this time, in one paragraph
    /// with the policy line that would let it write the real places
    /// instead; `None` when it wrote nothing there.
    pub fn report(&self) -> Option<String> {
        let written = written_since(&self.home, self.since, &self.skip);
        if written.is_empty() {
            return None;
        }
        let shown = |p: &Path| crate::hostenv::shown(p, self.user_home.as_deref());
        let mut named: Vec<String> = written
            .iter()
            .take(MAX_NAMED)
            .map(|w| format!("~/{}", w.display()))
            .collect();
        if written.len() > MAX_NAMED {
            named.push(format!("and {} more", written.len() - MAX_NAMED));
        }
        let lines: Vec<String> = places(&written)
            .iter()
            .map(|p| format!("\"~/{}\"", p.display()))
            .collect();
        Some(format!(
            "the server wrote {} file{} under its home directory, outside its roots: {}. They are kept in its own store {} (it finds them at its next start), not in your home; to let it write the real places instead, add to the policy: [runtime] write = [{}]",
            written.len(),
            if written.len() == 1 { "" } else { "s" },
            named.join(", "),
            shown(&self.home),
            lines.join(", ")
        ))
    }
}

/// Most entries and bytes one directory brings into a store
/// ([`import`]).
const IMPORT_MAX_ENTRIES: u64 = 100_000;
/// See [`IMPORT_MAX_ENTRIES`].
const IMPORT_MAX_BYTES: u64 = 1 << 30;

/// What [`import`] did with one of the user's directories.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Imported {
    /// Copied into the store: this many files.
    Copied(u64),
    /// The store already holds that place: left as it is (the server's own
    /// state there wins).
    AlreadyThere,
}

/// Why a directory cannot be imported.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ImportError {
    /// The directory is not under the home directory (a store holds only
    /// what the server finds under its home).
    #[error("{} is not under the home directory", .0.display())]
    NotInHome(PathBuf),
    /// Larger than an import takes.
    #[error(
        "{} holds more than {IMPORT_MAX_ENTRIES} entries or {} MiB: copy what the server needs into {} yourself",
        .0.display(),
        IMPORT_MAX_BYTES >> 20,
        .1.display()
    )]
    TooLarge(PathBuf, PathBuf),
    /// The store cannot be made, or the copy failed (nothing is left of
    /// it).
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl From<io::Error> for ImportError {
    fn from(e: io::Error) -> ImportError {
        ImportError::Store(StoreError::Io(e))
    }
}

/// Copy the user's directory `dir` (under `home`) into the store `store`
/// at the same place below its `home/`, where the server finds it: the
/// user's statement (`wrap --import-state`) that this directory is the
/// server's state. The original is never written; a place the store holds
/// already is left as it is.
///
/// # Security
///
/// A copy, not a grant: the server reaches its own copy, never the
/// user's directory. Everything is done through descriptors, never
/// following a link: the copy is made in a directory of the store the
/// server cannot reach (beside `home/`), reading the user's directory
/// with `O_NOFOLLOW` at every step (a link is copied as a link, never
/// read through: a server that may write there cannot swap a file for a
/// link to a secret), then moved into `home/` along directories opened
/// one by one without following links (the server may have made links
/// in its store to lead the copy elsewhere), without replacing anything.
/// Devices, sockets and pipes are left out. A failed or too large import
/// leaves nothing.
pub fn import(home: &Path, store: &Path, dir: &Path) -> Result<Imported, ImportError> {
    use rustix::fs::{Mode, OFlags, RenameFlags};
    let rel = dir
        .strip_prefix(home)
        .ok()
        .filter(|r| !r.as_os_str().is_empty())
        .ok_or_else(|| ImportError::NotInHome(dir.to_path_buf()))?;
    let ready = ensure(store)?;
    let too_large = || ImportError::TooLarge(dir.to_path_buf(), ready.home.join(rel));
    // The staging directory: the store's own, out of the server's reach.
    let staging = store.join(format!(".import-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&staging);
    std::fs::DirBuilder::new().mode(0o700).create(&staging)?;
    let copied = (|| {
        let dirs = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
        let stage = rustix::fs::open(&staging, dirs, Mode::empty()).map_err(io::Error::from)?;
        let src = rustix::fs::open(dir, dirs, Mode::empty()).map_err(io::Error::from)?;
        rustix::fs::mkdirat(&stage, "payload", Mode::from_raw_mode(0o700))
            .map_err(io::Error::from)?;
        let dst = rustix::fs::openat(&stage, "payload", dirs, Mode::empty())
            .map_err(io::Error::from)?;
        let mut count = Budget::default();
        copy_dir(&src, &dst, &mut count)?;
        if count.over() {
            return Err(too_large());
        }
        // Into home/, one directory at a time, never through a link.
        let mut at = rustix::fs::open(&ready.home, dirs, Mode::empty()).map_err(io::Error::from)?;
        let parts: Vec<&std::ffi::OsStr> = rel.iter().collect();
        let Some((last, parents)) = parts.split_last() else {
            return Err(ImportError::NotInHome(dir.to_path_buf()));
        };
        for part in parents {
            match rustix::fs::mkdirat(&at, *part, Mode::from_raw_mode(0o700)) {
                Ok(()) | Err(rustix::io::Errno::EXIST) => {}
                Err(e) => return Err(io::Error::from(e).into()),
            }
            at = rustix::fs::openat(&at, *part, dirs, Mode::empty()).map_err(|e| {
                io::Error::other(format!(
                    "{} in the server's store is not a directory ({e}): nothing imported",
                    Path::new(part).display()
                ))
            })?;
        }
        match rustix::fs::renameat_with(&stage, "payload", &at, *last, RenameFlags::NOREPLACE) {
            Ok(()) => Ok(Imported::Copied(count.files)),
            Err(rustix::io::Errno::EXIST) => Ok(Imported::AlreadyThere),
            Err(e) => Err(io::Error::from(e).into()),
        }
    })();
    let _ = std::fs::remove_dir_all(&staging);
    copied
}

/// What an import has copied so far.
#[derive(Debug, Default)]
struct Budget {
    entries: u64,
    bytes: u64,
    files: u64,
}

impl Budget {
    fn over(&self) -> bool {
        self.entries > IMPORT_MAX_ENTRIES || self.bytes > IMPORT_MAX_BYTES
    }
}

/// Copy what the directory `src` holds into the directory `dst`, through
/// descriptors, following no link (see [`import`]).
fn copy_dir(
    src: &std::os::fd::OwnedFd,
    dst: &std::os::fd::OwnedFd,
    count: &mut Budget,
) -> Result<(), ImportError> {
    use rustix::fs::{AtFlags, FileType, Mode, OFlags};
    let dirs = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    let mut names = Vec::new();
    for entry in rustix::fs::Dir::read_from(src).map_err(io::Error::from)? {
        let entry = entry.map_err(io::Error::from)?;
        let name = entry.file_name().to_owned();
        if name.as_bytes() != b"." && name.as_bytes() != b".." {
            names.push(name);
        }
    }
    for name in names {
        count.entries += 1;
        if count.over() {
            return Ok(());
        }
        let st = match rustix::fs::statat(src, &name, AtFlags::SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            // Gone since.
            Err(_) => continue,
        };
        let mode = Mode::from_raw_mode((st.st_mode & 0o777) | 0o600);
        match FileType::from_raw_mode(st.st_mode) {
            FileType::Directory => {
                let Ok(from) = rustix::fs::openat(src, &name, dirs, Mode::empty()) else {
                    continue;
                };
                rustix::fs::mkdirat(dst, &name, Mode::from_raw_mode(0o700))
                    .map_err(io::Error::from)?;
                let to = rustix::fs::openat(dst, &name, dirs, Mode::empty())
                    .map_err(io::Error::from)?;
                copy_dir(&from, &to, count)?;
            }
            FileType::Symlink => {
                let Ok(target) = rustix::fs::readlinkat(src, &name, Vec::new()) else {
                    continue;
                };
                rustix::fs::symlinkat(&target, dst, &name).map_err(io::Error::from)?;
            }
            FileType::RegularFile => {
                let Ok(from) = rustix::fs::openat(
                    src,
                    &name,
                    OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                ) else {
                    continue;
                };
                // Still a regular file (not a device swapped in).
                if !rustix::fs::fstat(&from)
                    .is_ok_and(|s| FileType::from_raw_mode(s.st_mode) == FileType::RegularFile)
                {
                    continue;
                }
                let to = rustix::fs::openat(
                    dst,
                    &name,
                    OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    mode,
                )
                .map_err(io::Error::from)?;
                let (mut from, mut to) = (std::fs::File::from(from), std::fs::File::from(to));
                count.bytes += io::copy(&mut io::Read::take(&mut from, IMPORT_MAX_BYTES + 1), &mut to)?;
                count.files += 1;
            }
            _ => {}
        }
        if count.over() {
            return Ok(());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(a: &[&str]) -> Vec<OsString> {
        a.iter().map(OsString::from).collect()
    }

    #[test]
    fn an_import_never_follows_a_link_the_server_made_in_its_store() {
        // A server that ran before made `.config` in its store's home a
        // link to a place outside: the import must not write there.
        let t = tempfile::tempdir().unwrap();
        let home = t.path().join("home");
        let mine = home.join(".config/my-server");
        std::fs::create_dir_all(&mine).unwrap();
        std::fs::write(mine.join("token"), "theirs").unwrap();
        let store = t.path().join("state/rootfence/servers/my-server-0");
        let ready = ensure(&store).unwrap();
        let outside = t.path().join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, ready.home.join(".config")).unwrap();
        assert!(import(&home, &store, &mine).is_err());
        assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
        // Nothing staged is left in the store either.
        let left: Vec<_> = std::fs::read_dir(&store)
            .unwrap()
            .flatten()
            .map(|e| e.file_name())
            .collect();
        assert_eq!(left, vec![std::ffi::OsString::from("home")]);
    }

    #[test]
    fn an_import_reads_no_file_through_a_link_swapped_in_while_it_copies() {
        // Where the server may write the user's directory, it swaps a
        // file for a link to a secret while the import copies: the copy
        // holds a link at most, never the secret's content.
        let t = tempfile::tempdir().unwrap();
        let home = t.path().join("home");
        let mine = home.join(".config/my-server");
        std::fs::create_dir_all(mine.join("sub")).unwrap();
        for i in 0..2000 {
            std::fs::write(mine.join(format!("sub/f{i}")), "theirs").unwrap();
        }
        let secret = t.path().join("secret");
        std::fs::write(&secret, "SECRET").unwrap();
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let swapper = {
            let (stop, sub, secret) = (stop.clone(), mine.join("sub"), secret.clone());
            std::thread::spawn(move || {
                let mut i = 0;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let f = sub.join(format!("f{}", i % 2000));
                    let _ = std::fs::remove_file(&f);
                    let _ = std::os::unix::fs::symlink(&secret, &f);
                    i += 7;
                }
            })
        };
        let store = t.path().join("state/rootfence/servers/my-server-0");
        let r = import(&home, &store, &mine);
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        swapper.join().unwrap();
        assert!(matches!(r, Ok(Imported::Copied(_))), "{r:?}");
        for e in std::fs::read_dir(store.join("home/.config/my-server/sub")).unwrap() {
            let p = e.unwrap().path();
            if std::fs::symlink_metadata(&p).unwrap().is_file() {
                assert_eq!(std::fs::read_to_string(&p).unwrap(), "theirs", "{}", p.display());
            }
        }
    }

    #[test]
    fn an_import_copies_the_users_directory_into_the_store_once() {
        let t = tempfile::tempdir().unwrap();
        let home = t.path().join("home");
        let mine = home.join(".config/my-server");
        std::fs::create_dir_all(mine.join("sub")).unwrap();
        std::fs::write(mine.join("settings.json"), "theirs").unwrap();
        std::fs::write(mine.join("sub/x"), "x").unwrap();
        std::os::unix::fs::symlink(home.join(".ssh/id_rsa"), mine.join("key")).unwrap();
        let store = t.path().join("state/rootfence/servers/my-server-0");
        assert_eq!(import(&home, &store, &mine).unwrap(), Imported::Copied(2));
        let copy = store.join("home/.config/my-server");
        assert_eq!(std::fs::read_to_string(copy.join("settings.json")).unwrap(), "theirs");
        assert_eq!(std::fs::read_to_string(copy.join("sub/x")).unwrap(), "x");
        // A link stays a link, to where it pointed.
        assert_eq!(std::fs::read_link(copy.join("key")).unwrap(), home.join(".ssh/id_rsa"));
        // Nothing half-made is left beside it.
        let beside: Vec<_> = std::fs::read_dir(store.join("home/.config")).unwrap().collect();
        assert_eq!(beside.len(), 1);
        // The server's own state wins a second import.
        std::fs::write(copy.join("settings.json"), "the server's").unwrap();
        assert_eq!(import(&home, &store, &mine).unwrap(), Imported::AlreadyThere);
        assert_eq!(
            std::fs::read_to_string(copy.join("settings.json")).unwrap(),
            "the server's"
        );
        assert_eq!(std::fs::read_to_string(mine.join("settings.json")).unwrap(), "theirs");
        // Only what lies under the home.
        assert!(matches!(
            import(&home, &store, t.path()),
            Err(ImportError::NotInHome(_))
        ));
    }

    #[test]
    fn versions_are_left_out_of_package_specs() {
        for (spec, bare) in [
            ("@scope/pkg@1.2.3", "@scope/pkg"),
            ("@scope/pkg", "@scope/pkg"),
            ("pkg@latest", "pkg"),
            ("npm:@scope/pkg@2", "npm:@scope/pkg"),
            ("npm:pkg@2", "npm:pkg"),
            ("mcp-server-time==0.6.2", "mcp-server-time"),
            ("markitdown-mcp>=0.1", "markitdown-mcp"),
            ("/home/u/src/x@2/index.js", "/home/u/src/x@2/index.js"),
            ("git+https://h/x.git@v1", "git+https://h/x.git@v1"),
            ("--from=x@1", "--from=x@1"),
            ("a=b", "a=b"),
            ("user@host", "user@host"),
            ("pkg@^2.1", "pkg"),
        ] {
            assert_eq!(without_version(spec), bare, "{spec}");
        }
    }

    #[test]
    fn an_upgrade_keeps_the_store_and_another_command_gets_another() {
        let a = ServerId::of(&argv(&["npx", "-y", "@x/server@1.0.0"]), Some("server"));
        let b = ServerId::of(&argv(&["npx", "-y", "@x/server@latest"]), Some("server"));
        let c = ServerId::of(&argv(&["npx", "-y", "@y/server@1.0.0"]), Some("server"));
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.as_str().starts_with("server-"), "{a}");
    }

    #[test]
    fn the_label_is_a_plain_file_name_and_not_the_identity() {
        let id = ServerId::of(&argv(&["/bin/x"]), Some("../.ssh/My Server"));
        assert!(!id.as_str().contains('/'), "{id}");
        assert!(!id.as_str().starts_with('.'), "{id}");
        // The same command under another label: same hash.
        let other = ServerId::of(&argv(&["/bin/x"]), Some("claude"));
        assert_eq!(
            id.as_str().rsplit('-').next(),
            other.as_str().rsplit('-').next()
        );
    }

    #[test]
    fn the_store_is_in_rootfences_state_directory() {
        let env = HostEnv {
            home: Some("/home/u".into()),
            ..HostEnv::default()
        };
        let id = ServerId::of(&argv(&["x"]), Some("x"));
        assert_eq!(
            location(&env, &id).unwrap(),
            PathBuf::from(format!("/home/u/.local/state/rootfence/servers/{id}"))
        );
        let mut env = env;
        env.vars.insert("XDG_STATE_HOME".into(), "/s".into());
        assert_eq!(
            location(&env, &id).unwrap(),
            PathBuf::from(format!("/s/rootfence/servers/{id}"))
        );
        env.vars.insert("XDG_STATE_HOME".into(), "rel".into());
        env.home = None;
        assert_eq!(location(&env, &id), None);
    }

    #[test]
    fn a_store_is_made_private_and_a_link_in_its_place_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("servers/x-1");
        let r = ensure(&dir).unwrap();
        assert_eq!(r.home, std::fs::canonicalize(dir.join("home")).unwrap());
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700);
        // A second time: the same store.
        assert_eq!(ensure(&dir).unwrap().identity, r.identity);
        // A link where the store's home should be is not followed.
        let other = tmp.path().join("servers/x-2");
        std::fs::create_dir_all(&other).unwrap();
        std::os::unix::fs::symlink(tmp.path(), other.join("home")).unwrap();
        assert!(ensure(&other).is_err());
    }

    #[test]
    fn what_the_server_left_in_the_way_is_moved_aside_and_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        std::fs::create_dir_all(home.join("ok/dir")).unwrap();
        std::os::unix::fs::symlink("/elsewhere", home.join(".cache")).unwrap();
        std::fs::write(home.join(".gitconfig-dir"), "mine").unwrap();
        std::fs::create_dir_all(home.join(".link-wanted")).unwrap();
        let made = [
            (PathBuf::from("ok"), Made::Dir),
            (PathBuf::from("ok/dir"), Made::Dir),
            (PathBuf::from(".cache"), Made::Dir),
            (PathBuf::from(".cache/uv"), Made::Dir),
            (PathBuf::from(".gitconfig-dir/x"), Made::File),
            (PathBuf::from(".link-wanted"), Made::Link),
            (PathBuf::from("missing/x"), Made::File),
        ];
        let moved = clear_way(&home, &made);
        let from: Vec<_> = moved.iter().map(|(f, _)| f.clone()).collect();
        assert_eq!(
            from,
            vec![
                home.join(".cache"),
                home.join(".gitconfig-dir"),
                home.join(".link-wanted")
            ]
        );
        for (_, to) in &moved {
            assert!(to.starts_with(tmp.path().join("displaced")), "{to:?}");
            assert!(to.symlink_metadata().is_ok(), "kept: {to:?}");
        }
        assert!(home.join("ok/dir").is_dir());
    }

    #[test]
    fn what_was_written_is_listed_with_the_lines_that_would_allow_it() {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path();
        std::fs::create_dir_all(home.join(".cache/uv/x")).unwrap();
        std::fs::write(home.join(".cache/uv/x/f"), "").unwrap();
        // File times come from a coarse clock, behind the fine one.
        let since = SystemTime::now() - std::time::Duration::from_secs(1);
        // Written at an earlier session.
        std::fs::File::options()
            .write(true)
            .open(home.join(".cache/uv/x/f"))
            .unwrap()
            .set_modified(since - std::time::Duration::from_secs(3600))
            .unwrap();
        std::fs::create_dir_all(home.join("mcp-data/db")).unwrap();
        std::fs::write(home.join("mcp-data/db/context.db"), "x").unwrap();
        std::fs::write(home.join(".tool.json"), "{}").unwrap();
        std::fs::write(home.join(".gitconfig"), "").unwrap();
        std::fs::create_dir_all(home.join(".config/tool")).unwrap();
        std::fs::write(home.join(".config/tool/s.json"), "{}").unwrap();
        std::os::unix::fs::symlink("/x", home.join(".link")).unwrap();
        let w = written_since(home, since, &[PathBuf::from(".gitconfig")]);
        assert_eq!(
            w,
            vec![
                PathBuf::from(".config/tool/s.json"),
                PathBuf::from(".tool.json"),
                PathBuf::from("mcp-data/db/context.db")
            ]
        );
        assert_eq!(
            places(&w),
            vec![
                PathBuf::from(".config/tool"),
                PathBuf::from(".tool.json"),
                PathBuf::from("mcp-data")
            ]
        );
        let kept = Kept {
            home: home.to_path_buf(),
            since,
            skip: vec![PathBuf::from(".gitconfig")],
            user_home: None,
        };
        let r = kept.report().unwrap();
        assert!(r.contains("3 files"), "{r}");
        assert!(
            r.contains(r#"[runtime] write = ["~/.config/tool", "~/.tool.json", "~/mcp-data"]"#),
            "{r}"
        );
        let later = Kept {
            since: SystemTime::now() + std::time::Duration::from_secs(60),
            ..kept
        };
        assert_eq!(later.report(), None);
    }
}
