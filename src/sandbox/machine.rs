//! What this machine gives rootfence, remembered for the boot: what a
//! launch found the kernel refuses (namespaces, overlay mounts, a network
//! namespace) and what the probes of `doctor` and `explain` found, so that
//! a later process neither probes again nor retries what was refused.
//!
//! The record is rootfence's own state, one file per key in
//! `$XDG_STATE_HOME/rootfence/machine/` (or `~/.local/state/...`), a
//! directory servers are denied (see
//! [`Policy::with_state_dirs`](crate::policy::Policy::with_state_dirs)).
//! Its key is what the answers depend on: the boot, the kernel, the user,
//! rootfence's version, and what decides namespaces around rootfence (its
//! user namespace, the seccomp filters it runs under, the sysctls that
//! allow unprivileged user namespaces). A record whose key differs, or
//! that cannot be read whole, counts as none.
//!
//! # Security
//!
//! A record only ever says what was *refused*: a launch reads it to start
//! on the rung a refusal leaves, never on a better one than the kernel
//! grants. The one thing it keeps that was granted, where servers'
//! cgroups are made, is checked again before it is used and tried by the
//! launch itself, which probes again when the kernel refuses it (the
//! cgroup module's own section, which this file keeps without reading).
//! Where the policy requires namespaces the record is not read
//! (the launch tries, and a refusal is an error as it always was). A
//! record can be stale (an AppArmor profile loaded since): `doctor`
//! probes again and rewrites it.

use std::hash::Hasher;
use std::path::PathBuf;
use std::sync::Mutex;

use serde::{Deserialize, Serialize};

use super::nsprobe::{NamespaceSupport, NetnsSupport, kernel_release};

/// What a launch found about the server's namespaces.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "found", rename_all = "kebab-case")]
pub enum Refused {
    /// The kernel (or a sandbox around rootfence) refuses the namespaces.
    Namespaces {
        /// Why, as the launch said it.
        why: String,
    },
    /// The namespaces work, overlay mounts in them do not.
    Overlays {
        /// Why, as the launch said it.
        why: String,
    },
}

/// The record of one key.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The key it was written for, whole (checked on reading).
    pub key: String,
    /// What launches found refused, if anything.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launch: Option<Refused>,
    /// Why a network namespace was refused a launch, if it was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netns_refused: Option<String>,
    /// The namespace probe's answer (`doctor`, `explain`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespaces: Option<NamespaceSupport>,
    /// The network namespace probe's answer (`doctor`, `explain`, a launch
    /// with `allow_domains` on a machine whose answer is not known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_namespace: Option<NetnsSupport>,
    /// Where servers' cgroups are made, as a probe found it (only where
    /// both controllers could be had). The cgroup module's own section: it
    /// writes and reads it (a section it cannot read counts as none); this
    /// record only keeps it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cgroup: Option<serde_json::Value>,
}

impl Record {
    /// Namespace support as far as it is known without a probe: the
    /// probe's answer, else a launch's refusal.
    pub fn namespace_support(&self) -> Option<NamespaceSupport> {
        if let Some(n) = &self.namespaces {
            return Some(n.clone());
        }
        match &self.launch {
            Some(Refused::Namespaces { why }) => Some(NamespaceSupport::refused(why.clone())),
            _ => None,
        }
    }

    /// Network namespace support as far as it is known without a probe.
    pub fn netns_support(&self) -> Option<NetnsSupport> {
        if let Some(why) = &self.netns_refused {
            return Some(NetnsSupport {
                available: false,
                why: Some(why.clone()),
            });
        }
        self.network_namespace.clone()
    }
}

/// The key of this process's record: the boot, the kernel, the user,
/// rootfence's version, and what decides namespaces around rootfence.
fn key() -> String {
    let read = |p: &str| {
        std::fs::read_to_string(p)
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    let userns = std::fs::read_link("/proc/self/ns/user")
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    let filters = read("/proc/self/status")
        .lines()
        .find_map(|l| l.strip_prefix("Seccomp_filters:").map(str::trim))
        .unwrap_or("")
        .to_string();
    format!(
        "boot={} kernel={} uid={} version={} userns={userns} seccomp_filters={filters} max_user_namespaces={} apparmor_restrict={} userns_clone={}",
        read("/proc/sys/kernel/random/boot_id"),
        kernel_release(),
        rustix::process::getuid().as_raw(),
        env!("CARGO_PKG_VERSION"),
        read("/proc/sys/user/max_user_namespaces"),
        read("/proc/sys/kernel/apparmor_restrict_unprivileged_userns"),
        read("/proc/sys/kernel/unprivileged_userns_clone"),
    )
}

/// The directory of the records: `$XDG_STATE_HOME/rootfence/machine`, or
/// `~/.local/state/rootfence/machine`; `None` without either.
fn dir() -> Option<PathBuf> {
    let abs = |v: &str| {
        std::env::var_os(v)
            .map(PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    let base = abs("XDG_STATE_HOME").or_else(|| abs("HOME").map(|h| h.join(".local/state")))?;
    Some(base.join("rootfence/machine"))
}

/// The file of `key`'s record.
fn file(key: &str) -> Option<PathBuf> {
    let mut h = siphasher::sip::SipHasher13::new_with_keys(0x6d61_6368, 0x696e_6521);
    h.write(key.as_bytes());
    Some(dir()?.join(format!("{:016x}.json", h.finish())))
}

/// This process's record, read once.
static RECORD: Mutex<Option<Record>> = Mutex::new(None);

/// This machine's record for this process (empty when there is none or it
/// cannot be read whole).
pub fn record() -> Record {
    let Ok(mut slot) = RECORD.lock() else {
        return Record::default();
    };
    slot.get_or_insert_with(|| {
        let key = key();
        file(&key)
            .and_then(|f| crate::statefile::read_whole(&f, MAX_RECORD))
            .and_then(|b| serde_json::from_slice::<Record>(&b).ok())
            .filter(|r| r.key == key)
            .unwrap_or(Record {
                key,
                ..Record::default()
            })
    })
    .clone()
}

/// Most bytes of a record read (one is a few hundred).
const MAX_RECORD: u64 = 64 * 1024;


/// Change this process's record with `f` and write it (whole or not at
/// all; a record that cannot be written is only not remembered).
pub fn update(f: impl FnOnce(&mut Record)) {
    let mut r = record();
    let before = r.clone();
    f(&mut r);
    if r == before {
        return;
    }
    if let Ok(mut slot) = RECORD.lock() {
        *slot = Some(r.clone());
    }
    if let Err(e) = write(&r) {
        tracing::debug!("cannot remember what this machine gives rootfence: {e}");
    }
}

/// Write `r` to its file, whole or not at all.
fn write(r: &Record) -> std::io::Result<()> {
    let file = file(&r.key).ok_or_else(|| std::io::Error::other("no state directory"))?;
    crate::statefile::write_whole(&file, &serde_json::to_vec(r).map_err(std::io::Error::other)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_says_what_was_refused_and_nothing_else() {
        let r = Record::default();
        assert_eq!(r.namespace_support(), None);
        assert_eq!(r.netns_support(), None);
        let r = Record {
            launch: Some(Refused::Namespaces {
                why: "clone3: EPERM".into(),
            }),
            netns_refused: Some("EPERM".into()),
            ..Record::default()
        };
        let n = r.namespace_support().unwrap();
        assert!(!n.available);
        assert_eq!(n.why_not(), "clone3: EPERM");
        assert!(!r.netns_support().unwrap().available);
        let text = serde_json::to_string(&r).unwrap();
        assert_eq!(serde_json::from_str::<Record>(&text).unwrap(), r);
    }

    #[test]
    fn the_key_names_the_boot_the_kernel_the_user_and_the_version() {
        let k = key();
        for part in ["boot=", "kernel=", "uid=", "version=", "seccomp_filters="] {
            assert!(k.contains(part), "{k}");
        }
        assert!(k.contains(env!("CARGO_PKG_VERSION")));
    }
}
