//! Running a program of the user's blind to what the server may write.
//!
//! rootfence asks the user's package runners where their caches are
//! ([`super::launchers`]) and grants the answer. A runner answers from its
//! configuration, and a configuration may name code it runs (yarn's
//! `yarnPath`, npm's scripts). A configuration the server wrote, in a root
//! it may write, would choose what the server is granted, or run the
//! server's code with the user's rights. So the runner is asked under a
//! Landlock ruleset that allows everything but the places the server may
//! write ([`Blindfold`]): what it reads or runs there is refused, as if it
//! were not there, and its answer comes from what the user wrote alone.

use std::collections::BTreeSet;
use std::fmt;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use landlock::{
    ABI, Access, AccessFs, BitFlags, CompatLevel, Compatible, PathBeneath, Ruleset, RulesetAttr,
    RulesetCreated, RulesetCreatedAttr,
};
use rustix::fs::{Mode, OFlags};

/// Most rules a blindfold is made of: a place the server may write in a
/// directory of tens of thousands of entries is not worth the ruleset.
const MAX_RULES: usize = 20_000;

/// A Landlock ruleset allowing every access but to the places the server
/// may write, for a program of the user's to run under.
///
/// # Security
///
/// For each hidden place, every entry of each directory on the way to it
/// (from `/`) is allowed whole, except the entry that leads on towards it
/// (and a temporary directory of the program's own, its `TMPDIR`);
/// the directories on the way may only be listed (making a new entry in
/// them is refused). Every directory may be listed, a hidden one too: its
/// names are seen, never what its files hold, and nothing in it runs. A link among the entries is
/// not followed: what it leads to is ruled where that lies, so a link
/// outside that leads into a hidden place reaches nothing. What is not
/// hidden is what the server cannot make: a path alias the kernel already
/// holds (a bind mount of a hidden place elsewhere), or a hard link the
/// user made from outside to a file in a hidden place. Landlock does not
/// rule on `stat` or `readlink`: the program sees what names a hidden
/// place holds and where its links lead, so what it answers is checked
/// again by its caller (an answer reached through a link in a hidden place
/// is refused).
#[derive(Debug)]
pub(super) struct Blindfold {
    ruleset: OwnedFd,
    /// A temporary directory of the program's own, allowed whole (its
    /// `TMPDIR`: the system's may lie on the way to a hidden place, where
    /// no new entry can be made), removed with the blindfold.
    tmp: Option<Tmp>,
}

/// A directory made for one blindfold, removed with it.
#[derive(Debug)]
struct Tmp(PathBuf);

impl Tmp {
    /// A new directory of mode 0700 in `base`.
    fn new_in(base: &Path) -> Option<Tmp> {
        let mut bytes = [0u8; 8];
        rustix::rand::getrandom(&mut bytes, rustix::rand::GetRandomFlags::empty()).ok()?;
        let dir = base.join(format!(
            "rootfence-ask-{}-{:016x}",
            std::process::id(),
            u64::from_ne_bytes(bytes)
        ));
        rustix::fs::mkdir(&dir, Mode::from_raw_mode(0o700)).ok()?;
        Some(Tmp(dir))
    }

    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Why no blindfold could be made: the runner is then not asked.
#[derive(Debug)]
pub(super) enum Unavailable {
    /// The kernel has no Landlock.
    NoLandlock,
    /// A directory on the way holds too many entries.
    TooMany(PathBuf),
    /// The kernel refused a rule or the ruleset.
    Refused(String),
}

impl fmt::Display for Unavailable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unavailable::NoLandlock => f.write_str("this kernel has no Landlock"),
            Unavailable::TooMany(dir) => write!(
                f,
                "{} holds more than {MAX_RULES} entries",
                dir.display()
            ),
            Unavailable::Refused(why) => write!(f, "Landlock refused it: {why}"),
        }
    }
}

impl Blindfold {
    /// A blindfold hiding `places` (canonical where they exist); `None`
    /// when there is nothing to hide.
    pub(super) fn around(places: &[PathBuf]) -> Result<Option<Blindfold>, Unavailable> {
        let hidden = outermost(places);
        if hidden.is_empty() {
            return Ok(None);
        }
        let abi = ABI::V6;
        let all = AccessFs::from_all(abi);
        let refused = |e: landlock::RulesetError| Unavailable::Refused(e.to_string());
        let mut created = Ruleset::default()
            .set_compatibility(CompatLevel::BestEffort)
            .handle_access(all)
            .map_err(refused)?
            .create()
            .map_err(refused)?;
        allow_all_but(&mut created, &hidden, all, abi)?;
        let tmp = ["/tmp", "/var/tmp"]
            .iter()
            .map(Path::new)
            .find(|d| {
                let real = crate::canon::canonicalize(d).unwrap_or_else(|_| d.to_path_buf());
                !hidden.iter().any(|h| real.starts_with(h))
            })
            .and_then(Tmp::new_in);
        if let Some(t) = &tmp {
            let fd = rustix::fs::open(
                t.path(),
                OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            )
            .map_err(|e| Unavailable::Refused(format!("{}: {e}", t.path().display())))?;
            created
                .as_mut()
                .add_rule(PathBeneath::new(fd.as_fd(), all))
                .map_err(|e| Unavailable::Refused(format!("{}: {e}", t.path().display())))?;
        }
        let fd: Option<OwnedFd> = created.into();
        // Best effort on a kernel without Landlock makes no ruleset.
        fd.map(|ruleset| Some(Blindfold { ruleset, tmp }))
            .ok_or(Unavailable::NoLandlock)
    }

    /// Make `cmd` run under this blindfold (and with `no_new_privs`, which
    /// Landlock needs of an unprivileged caller).
    pub(super) fn apply(&self, cmd: &mut Command) -> std::io::Result<()> {
        if let Some(t) = &self.tmp {
            cmd.env("TMPDIR", t.path());
        }
        let fd = rustix::io::fcntl_dupfd_cloexec(self.ruleset.as_fd(), 3)?;
        let raw = fd.as_raw_fd();
        // SAFETY: the closure runs in the child between fork and exec and
        // makes two system calls only (no allocation, no lock); `raw` is
        // open there (the child holds every descriptor of the parent until
        // exec, and `fd` is kept alive by the closure).
        unsafe {
            cmd.pre_exec(move || {
                let _keep = &fd;
                if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                if libc::syscall(libc::SYS_landlock_restrict_self, raw, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        Ok(())
    }
}

/// The places of `places` that no other one holds.
fn outermost(places: &[PathBuf]) -> BTreeSet<PathBuf> {
    places
        .iter()
        .filter(|p| {
            !places
                .iter()
                .any(|q| q != *p && p.starts_with(q) && q.components().count() < p.components().count())
        })
        .cloned()
        .collect()
}

/// Rules allowing every entry of each directory on the way to a place of
/// `hidden` but those on the way (or hidden).
fn allow_all_but(
    created: &mut RulesetCreated,
    hidden: &BTreeSet<PathBuf>,
    all: BitFlags<AccessFs>,
    abi: ABI,
) -> Result<(), Unavailable> {
    // Listing is allowed everywhere (a program opens its home directory
    // to look up names in it); what a listing shows of a hidden place is
    // names, never what its files hold.
    let root = rustix::fs::open("/", OFlags::PATH | OFlags::CLOEXEC, Mode::empty())
        .map_err(|e| Unavailable::Refused(format!("/: {e}")))?;
    created
        .as_mut()
        .add_rule(PathBeneath::new(root.as_fd(), AccessFs::ReadDir))
        .map_err(|e| Unavailable::Refused(format!("/: {e}")))?;
    let on_the_way: BTreeSet<&Path> = hidden.iter().flat_map(|h| h.ancestors().skip(1)).collect();
    let mut rules = 0usize;
    for dir in &on_the_way {
        // A directory that is not there holds nothing to allow.
        let Ok(entries) = std::fs::read_dir(dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if hidden.contains(&path) || on_the_way.contains(path.as_path()) {
                continue;
            }
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_symlink() {
                continue;
            }
            let Ok(fd) = rustix::fs::open(
                &path,
                OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::empty(),
            ) else {
                continue;
            };
            let access = if kind.is_dir() {
                all
            } else {
                all & AccessFs::from_file(abi)
            };
            created
                .as_mut()
                .add_rule(PathBeneath::new(fd.as_fd(), access))
                .map_err(|e| Unavailable::Refused(format!("{}: {e}", path.display())))?;
            rules += 1;
            if rules > MAX_RULES {
                return Err(Unavailable::TooMany(dir.to_path_buf()));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_place_inside_another_is_hidden_with_it() {
        let got = outermost(&[
            PathBuf::from("/home/u/work/a"),
            PathBuf::from("/home/u/work"),
            PathBuf::from("/tmp/x"),
            PathBuf::from("/home/u/workshop"),
        ]);
        let want: BTreeSet<PathBuf> = ["/home/u/work", "/tmp/x", "/home/u/workshop"]
            .into_iter()
            .map(PathBuf::from)
            .collect();
        assert_eq!(got, want);
    }

    /// Under the blindfold a program reads and runs what lies beside a
    /// hidden place, and nothing inside it, nor through a link that leads
    /// there; it writes outside as before (a file that is there: a
    /// directory on the way to a hidden place takes no new entry).
    #[test]
    fn what_is_hidden_is_neither_read_nor_run_and_the_rest_is() {
        let tmp = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        let hidden = base.join("w");
        std::fs::create_dir_all(&hidden).unwrap();
        std::fs::write(hidden.join("conf"), "SERVER").unwrap();
        std::fs::write(hidden.join("hook.sh"), "echo HOOK\n").unwrap();
        std::fs::write(base.join("mine"), "USER").unwrap();
        std::fs::write(base.join("out"), "").unwrap();
        std::os::unix::fs::symlink(&hidden, base.join("link")).unwrap();
        let script = format!(
            "cat {b}/w/conf; cat {b}/link/conf; sh {b}/w/hook.sh; cat {b}/mine; echo OUT > {b}/out; \
             f=$(mktemp) && echo T > \"$f\" && cat \"$f\"",
            b = base.display()
        );
        let blind = Blindfold::around(std::slice::from_ref(&hidden))
            .unwrap()
            .unwrap();
        let mut cmd = Command::new("/bin/sh");
        cmd.args(["-c", &script]);
        blind.apply(&mut cmd).unwrap();
        let out = cmd.output().unwrap();
        let said = String::from_utf8_lossy(&out.stdout);
        // And it has a temporary directory of its own, though /tmp is on
        // the way to the hidden place.
        assert_eq!(said.trim(), "USERT", "{out:?}");
        assert_eq!(std::fs::read_to_string(base.join("out")).unwrap(), "OUT\n");
        // Nothing to hide: no blindfold.
        assert!(Blindfold::around(&[]).unwrap().is_none());
    }
}
