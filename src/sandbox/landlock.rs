//! The Landlock ruleset a plan describes, built in the parent.
//!
//! Every filesystem access right the running kernel knows is handled (denied
//! unless a rule allows it), TCP bind and connect are handled from ABI 4 on,
//! and the plan's scopes from ABI 6 on. The ruleset is created with
//! [`CompatLevel::HardRequirement`] for exactly the rights of the kernel's
//! ABI: if anything could not be handled as asked, building fails instead of
//! silently enforcing less. The rule for the server's `/proc/self` is left
//! to the child (see [`super::child`]).

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, CompatLevel, Compatible, NetPort, PathBeneath,
    Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, Scope,
};
use rustix::fs::{FileType, Mode, OFlags};

use super::SandboxError;
use super::ladder::Missing;
use crate::plan::SandboxPlan;
use crate::runtime::{PROC_SELF, Rights};

/// The highest Landlock ABI whose rights rootfence knows how to grant.
pub const MAX_KNOWN_ABI: u32 = 9;

/// A ruleset ready for `landlock_restrict_self`, minus `/proc/self`.
#[derive(Debug)]
pub struct PreparedRuleset {
    /// The ruleset descriptor (close-on-exec).
    pub fd: OwnedFd,
    /// Access rights for the child's `/proc` rule (with namespaces: the
    /// fresh `/proc` of the server's PID namespace; without: its own
    /// `/proc/self`); 0 for no rule.
    pub proc_access: u64,
    /// Access rights for the rule on a private layer (made in the child).
    pub private_access: u64,
    /// Access rights for the scratch directory (read-write, never
    /// executable), for a rule made in the child when the scratch is a
    /// filesystem of the view's own.
    pub scratch_access: u64,
    /// Read access to a directory, for rules made in the child.
    pub read_access: u64,
    /// The ABI the ruleset was built for.
    pub abi: u32,
    /// Number of path rules added (not counting `/proc/self`).
    pub path_rules: usize,
    /// The `O_PATH` descriptors opened for the grants (not the roots,
    /// whose handles the plan holds), for the view's survey to reuse.
    pub opened: std::collections::HashMap<std::path::PathBuf, OwnedFd>,
}

/// The filesystem rights that make a path writable. Creating character and
/// block devices is never granted: a server running as root could otherwise
/// make a node for a disk inside a root and read the disk through it.
fn write_rights() -> BitFlags<AccessFs> {
    AccessFs::WriteFile
        | AccessFs::RemoveDir
        | AccessFs::RemoveFile
        | AccessFs::MakeDir
        | AccessFs::MakeReg
        | AccessFs::MakeSock
        | AccessFs::MakeFifo
        | AccessFs::MakeSym
        | AccessFs::Refer
        | AccessFs::Truncate
        | AccessFs::IoctlDev
        | AccessFs::ResolveUnix
}

/// The Landlock rights for `rights` on a directory or (`is_dir` false) a
/// file, limited to what the ruleset handles.
///
/// Read is `read_file` and `read_dir`; write adds every write right above;
/// execute is `execute`, only when asked. A file gets only the rights that
/// apply to files (Landlock refuses directory rights on a file).
pub fn access_for(
    rights: Rights,
    is_dir: bool,
    handled: BitFlags<AccessFs>,
    abi: ABI,
) -> BitFlags<AccessFs> {
    let mut a = BitFlags::<AccessFs>::empty();
    if rights.read {
        a |= AccessFs::ReadFile | AccessFs::ReadDir;
    }
    if rights.write {
        a |= write_rights();
    }
    if rights.exec {
        a |= AccessFs::Execute;
    }
    a &= handled;
    if !is_dir {
        a &= AccessFs::from_file(abi);
    }
    a
}

fn ll_err(what: impl Into<String>) -> impl FnOnce(landlock::RulesetError) -> SandboxError {
    let what = what.into();
    move |source| SandboxError::Landlock { what, source }
}

fn is_dir(fd: BorrowedFd<'_>, path: &Path) -> Result<bool, SandboxError> {
    let st = rustix::fs::fstat(fd).map_err(|e| SandboxError::OpenPath {
        path: path.to_path_buf(),
        why: "granted path".into(),
        source: e.into(),
    })?;
    Ok(FileType::from_raw_mode(st.st_mode) == FileType::Directory)
}

/// Build the ruleset for `plan` on a kernel with Landlock ABI `abi`, plus a
/// read-write rule for the scratch directory `scratch`. With `namespaces`,
/// grants under `/proc` are left to the child (the server gets a fresh
/// `/proc` of its own PID namespace).
///
/// Root grants are ruled from the handle opened when the root was resolved;
/// every other grant is opened here with `O_PATH | O_CLOEXEC`. An absent
/// optional grant is skipped; an absent required one is an error.
///
/// # Security
///
/// The ruleset handles every filesystem right of ABI `abi` (denied unless
/// granted), TCP bind and connect (ABI 4+, allowed only for the plan's
/// ports) and the plan's scopes (ABI 6+). Building fails rather than handle
/// less than that.
pub fn prepare(
    plan: &SandboxPlan,
    scratch: Option<&Path>,
    store: Option<&Path>,
    abi: u32,
    namespaces: bool,
) -> Result<PreparedRuleset, SandboxError> {
    let known = abi.min(MAX_KNOWN_ABI);
    let abi_v = ABI::from(i32::try_from(known).unwrap_or(0));
    if abi_v == ABI::Unsupported {
        return Err(SandboxError::CannotEnforce {
            missing: vec![Missing::LandlockAbi],
        });
    }
    let mut handled_fs = AccessFs::from_all(abi_v);
    if plan.network.unix_sockets {
        // The policy allows connecting to any pathname unix socket.
        handled_fs.remove(AccessFs::ResolveUnix);
    }
    let mut created = create(plan, known, abi_v, handled_fs)?;
    let grants = add_grants(&mut created, plan, namespaces, handled_fs, abi_v)?;
    let mut path_rules = grants.path_rules;
    let own = [
        (scratch, "scratch directory"),
        (store, "the server's own store"),
    ];
    for (dir, why) in own {
        let Some(dir) = dir else { continue };
        let fd = open_path(dir).map_err(|source| SandboxError::OpenPath {
            path: dir.to_path_buf(),
            why: why.into(),
            source,
        })?;
        let access = access_for(Rights::RW, true, handled_fs, abi_v);
        created = created
            .add_rule(PathBeneath::new(fd.as_fd(), access))
            .map_err(ll_err(format!(
                "add the rule for the {why} {}",
                dir.display()
            )))?;
        path_rules += 1;
    }
    if known >= 4 {
        for &port in &plan.network.tcp_connect {
            created = created
                .add_rule(NetPort::new(port, AccessNet::ConnectTcp))
                .map_err(ll_err(format!("allow TCP connect to port {port}")))?;
        }
        for &port in &plan.network.tcp_bind {
            created = created
                .add_rule(NetPort::new(port, AccessNet::BindTcp))
                .map_err(ll_err(format!("allow TCP bind on port {port}")))?;
        }
    }
    let fd: Option<OwnedFd> = created.into();
    let fd = fd.ok_or_else(|| SandboxError::CannotEnforce {
        missing: vec![Missing::NoRuleset],
    })?;
    let all = Rights {
        read: true,
        write: true,
        exec: true,
    };
    Ok(PreparedRuleset {
        read_access: access_for(Rights::R, true, handled_fs, abi_v).bits(),
        scratch_access: access_for(Rights::RW, true, handled_fs, abi_v).bits(),
        private_access: access_for(all, true, handled_fs, abi_v).bits(),
        opened: grants.opened,
        fd,
        proc_access: grants.proc_access,
        abi: known,
        path_rules,
    })
}

/// The ruleset handling every right of ABI `known`: filesystem, TCP (ABI
/// 4), and the plan's scopes (ABI 6).
fn create(
    plan: &SandboxPlan,
    known: u32,
    abi_v: ABI,
    handled_fs: BitFlags<AccessFs>,
) -> Result<RulesetCreated, SandboxError> {
    let mut ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(handled_fs)
        .map_err(ll_err("handle the filesystem access rights"))?;
    if known >= 4 {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi_v))
            .map_err(ll_err("handle TCP bind and connect"))?;
    }
    if known >= 6 {
        let mut scopes = BitFlags::<Scope>::empty();
        if plan.scopes.signal {
            scopes |= Scope::Signal;
        }
        if plan.scopes.abstract_unix_socket {
            scopes |= Scope::AbstractUnixSocket;
        }
        if !scopes.is_empty() {
            ruleset = ruleset
                .scope(scopes)
                .map_err(ll_err("scope signals and abstract unix sockets"))?;
        }
    }
    ruleset.create().map_err(ll_err("create the ruleset"))
}

/// What [`add_grants`] made.
struct Granted {
    path_rules: usize,
    proc_access: u64,
    opened: std::collections::HashMap<std::path::PathBuf, OwnedFd>,
}

/// A rule for every grant of `plan` (but `/proc/self`, and with
/// `namespaces` everything under `/proc`, which the child rules on).
fn add_grants(
    created: &mut RulesetCreated,
    plan: &SandboxPlan,
    namespaces: bool,
    handled_fs: BitFlags<AccessFs>,
    abi_v: ABI,
) -> Result<Granted, SandboxError> {
    let mut out = Granted {
        path_rules: 0,
        proc_access: 0,
        opened: std::collections::HashMap::new(),
    };
    for g in &plan.grants {
        if g.path == Path::new(PROC_SELF) {
            out.proc_access = access_for(g.rights, true, handled_fs, abi_v).bits();
            continue;
        }
        if namespaces && g.path.starts_with("/proc") {
            continue;
        }
        let mine = match &g.handle {
            Some(_) => None,
            None => match open_path(&g.path) {
                Ok(fd) => Some(fd),
                Err(e) if g.optional && is_absent(&e) => continue,
                Err(source) => {
                    let why = g
                        .reasons
                        .iter()
                        .map(ToString::to_string)
                        .collect::<Vec<_>>()
                        .join("; ");
                    return Err(if is_absent(&source) {
                        SandboxError::MissingPath {
                            path: g.path.clone(),
                            why,
                        }
                    } else {
                        SandboxError::OpenPath {
                            path: g.path.clone(),
                            why,
                            source,
                        }
                    });
                }
            },
        };
        let fd = match (&g.handle, &mine) {
            (Some(h), _) => h.as_fd(),
            (None, Some(f)) => f.as_fd(),
            (None, None) => continue,
        };
        let access = access_for(g.rights, is_dir(fd, &g.path)?, handled_fs, abi_v);
        if !access.is_empty() {
            created
                .as_mut()
                .add_rule(PathBeneath::new(fd, access))
                .map_err(ll_err(format!("add the rule for {}", g.path.display())))?;
            out.path_rules += 1;
        }
        if let Some(fd) = mine {
            out.opened.insert(g.path.clone(), fd);
        }
    }
    Ok(out)
}

fn open_path(path: &Path) -> std::io::Result<OwnedFd> {
    Ok(rustix::fs::open(
        path,
        OFlags::PATH | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

fn is_absent(e: &std::io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::ENOENT) | Some(libc::ENOTDIR) | Some(libc::ELOOP)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_only_is_read_file_and_dir() {
        let all = AccessFs::from_all(ABI::V7);
        let a = access_for(Rights::R, true, all, ABI::V7);
        assert_eq!(a, AccessFs::ReadFile | AccessFs::ReadDir);
    }

    #[test]
    fn read_write_has_every_write_right_but_no_exec_or_devices() {
        let all = AccessFs::from_all(ABI::V7);
        let a = access_for(Rights::RW, true, all, ABI::V7);
        for r in [
            AccessFs::WriteFile,
            AccessFs::RemoveDir,
            AccessFs::RemoveFile,
            AccessFs::MakeDir,
            AccessFs::MakeReg,
            AccessFs::MakeSym,
            AccessFs::MakeSock,
            AccessFs::MakeFifo,
            AccessFs::Refer,
            AccessFs::Truncate,
            AccessFs::IoctlDev,
        ] {
            assert!(a.contains(r), "{r:?} missing");
        }
        assert!(!a.contains(AccessFs::Execute));
        assert!(!a.contains(AccessFs::MakeBlock));
        assert!(!a.contains(AccessFs::MakeChar));
        let ax = access_for(
            Rights {
                exec: true,
                ..Rights::RW
            },
            true,
            all,
            ABI::V7,
        );
        assert!(ax.contains(AccessFs::Execute));
    }

    #[test]
    fn files_get_only_file_rights() {
        let all = AccessFs::from_all(ABI::V7);
        let a = access_for(Rights::RW, false, all, ABI::V7);
        assert_eq!(a & !AccessFs::from_file(ABI::V7), BitFlags::empty());
        assert!(a.contains(AccessFs::WriteFile | AccessFs::Truncate));
    }

    #[test]
    fn unhandled_rights_are_not_granted() {
        let v1 = AccessFs::from_all(ABI::V1);
        let a = access_for(Rights::RW, true, v1, ABI::V1);
        assert!(!a.contains(AccessFs::Refer));
        assert!(!a.contains(AccessFs::Truncate));
    }
}
