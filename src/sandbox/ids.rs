//! Who rootfence runs as, and the uid and gid maps of the server's user
//! namespace.
//!
//! What a launch may do depends on it: root needs no user namespace to make
//! the others (it holds `CAP_SYS_ADMIN`), and only the machine's root (uid 0
//! of the initial user namespace) can write sysctls that are not the
//! namespace's own (`vm.memfd_noexec`). Root of a user namespace made by an
//! unprivileged user (`unshare -r`, a container) is root for the first and
//! not for the second.

use std::io;

/// Who rootfence runs as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Identity {
    /// uid 0 of the machine (the initial user namespace).
    MachineRoot,
    /// uid 0 of a user namespace whose 0 is another user of the machine
    /// (`unshare -r`, a rootless container).
    NamespaceRoot,
    /// Any other user.
    User,
}

impl Identity {
    /// The calling process's identity (found once: a process's user does
    /// not change while rootfence runs).
    pub fn current() -> Identity {
        static ONCE: std::sync::OnceLock<Identity> = std::sync::OnceLock::new();
        *ONCE.get_or_init(Identity::find)
    }

    fn find() -> Identity {
        // SAFETY: geteuid cannot fail.
        if unsafe { libc::geteuid() } != 0 {
            return Identity::User;
        }
        // In the initial user namespace the map is the identity over every
        // id; in another, uid 0 maps to something else or the range is
        // shorter.
        match std::fs::read_to_string("/proc/self/uid_map") {
            Ok(m) if is_initial_map(&m) => Identity::MachineRoot,
            Ok(_) => Identity::NamespaceRoot,
            // Cannot tell: claim nothing the machine's root could do.
            Err(_) => Identity::NamespaceRoot,
        }
    }

    /// uid 0 (of the machine or of a user namespace): the server's user,
    /// mount, PID and IPC namespaces are made without a user namespace.
    pub fn is_root(self) -> bool {
        self != Identity::User
    }
}

/// Whether a `uid_map` is the initial user namespace's.
fn is_initial_map(map: &str) -> bool {
    let fields: Vec<&str> = map.split_whitespace().collect();
    fields == ["0", "0", "4294967295"]
}

/// The uid and gid maps of a new user namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IdMaps {
    uid: String,
    gid: String,
    deny_setgroups: bool,
}

impl IdMaps {
    /// Root keeps every id (files keep their owners); another user maps
    /// only its own uid and gid.
    pub fn current() -> IdMaps {
        // SAFETY: geteuid and getegid cannot fail.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        if uid == 0 {
            IdMaps {
                uid: "0 0 4294967295\n".into(),
                gid: "0 0 4294967295\n".into(),
                deny_setgroups: false,
            }
        } else {
            IdMaps {
                uid: format!("{uid} {uid} 1\n"),
                gid: format!("{gid} {gid} 1\n"),
                deny_setgroups: true,
            }
        }
    }

    /// Write the maps of the user namespace of process `pid`.
    pub fn write(&self, pid: libc::pid_t) -> io::Result<()> {
        if self.deny_setgroups {
            std::fs::write(format!("/proc/{pid}/setgroups"), "deny")?;
        }
        std::fs::write(format!("/proc/{pid}/uid_map"), &self.uid)?;
        std::fs::write(format!("/proc/{pid}/gid_map"), &self.gid)?;
        Ok(())
    }
}

/// The `CLONE_NEW*` flags of the server's namespaces for `who`: user,
/// mount, PID and IPC; root makes the others without a user namespace
/// (the server's capabilities are dropped before it runs all the same).
pub fn namespace_flags(who: Identity) -> u64 {
    let user = if who.is_root() {
        0
    } else {
        libc::CLONE_NEWUSER
    };
    (user | libc::CLONE_NEWNS | libc::CLONE_NEWPID | libc::CLONE_NEWIPC) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_identity_map_is_the_machines() {
        assert!(is_initial_map("         0          0 4294967295\n"));
        assert!(!is_initial_map("0 1000 1\n"));
        assert!(!is_initial_map("0 0 65536\n"));
        assert!(!is_initial_map("0 0 4294967295\n1 1 1\n"));
    }

    #[test]
    fn root_makes_namespaces_without_a_user_namespace() {
        assert_eq!(
            namespace_flags(Identity::MachineRoot) & libc::CLONE_NEWUSER as u64,
            0
        );
        assert_eq!(
            namespace_flags(Identity::NamespaceRoot) & libc::CLONE_NEWUSER as u64,
            0
        );
        assert_ne!(
            namespace_flags(Identity::User) & libc::CLONE_NEWUSER as u64,
            0
        );
    }
}
