//! Capabilities: what rootfence holds (read in the parent, to decide what
//! the server drops) and dropping them in the child before `exec`.

use std::os::fd::RawFd;

use super::protocol::{Step, errno, fail};

const LINUX_CAPABILITY_VERSION_3: u32 = 0x2008_0522;
const CAP_SETPCAP: u32 = 8;

/// `struct __user_cap_header_struct`.
#[repr(C)]
struct CapHeader {
    version: u32,
    pid: libc::c_int,
}

/// `struct __user_cap_data_struct`.
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// What the calling process holds, for deciding what the child drops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CapState {
    /// The child would start with capabilities (root, or any capability
    /// effective, permitted or inheritable): they must be dropped.
    pub must_drop: bool,
    /// `CAP_SETPCAP` is effective, so the bounding set can be emptied.
    pub can_drop_bounding: bool,
    /// The effective user is root (`exec` gives root the bounding set).
    pub root: bool,
}

/// The calling process's capabilities.
pub fn cap_state() -> CapState {
    let mut header = CapHeader {
        version: LINUX_CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: capget writes two `CapData` into `data`.
    let r = unsafe {
        libc::syscall(
            libc::SYS_capget,
            &mut header as *mut CapHeader,
            data.as_mut_ptr(),
        )
    };
    // SAFETY: geteuid cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if r < 0 {
        // Cannot tell: try to drop everything (the child fails loudly if
        // it cannot).
        return CapState {
            must_drop: true,
            can_drop_bounding: root,
            root,
        };
    }
    let held = data
        .iter()
        .any(|d| d.effective | d.permitted | d.inheritable != 0);
    CapState {
        must_drop: root || held,
        can_drop_bounding: data[0].effective & (1 << CAP_SETPCAP) != 0,
        root,
    }
}

/// Capabilities the child drops.
#[derive(Debug, Clone, Copy)]
pub struct DropCaps {
    /// The highest capability number to try; the loop stops at the first
    /// one the kernel does not know.
    pub last_cap: u32,
    /// Empty the bounding set too (root: otherwise `exec` gives every
    /// capability in it back). Needs `CAP_SETPCAP`.
    pub bounding: bool,
}

/// Drop every capability `caps` names: the bounding set (when asked), the
/// ambient set, and effective, permitted and inheritable.
///
/// # Safety
///
/// Async-signal-safe: `prctl` and `capset` on locals. Call only in the
/// child; a failure is reported on `err` and the child exits.
pub(super) unsafe fn drop_capabilities(err: RawFd, caps: DropCaps) {
    // SAFETY (whole body): prctl and capset on locals.
    unsafe {
        if caps.bounding {
            for cap in 0..=caps.last_cap {
                if libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) < 0 {
                    // Past the kernel's last capability: done.
                    if cap > 0 && errno() == libc::EINVAL {
                        break;
                    }
                    fail(err, Step::DropCaps, cap, errno());
                }
            }
        }
        if libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL as libc::c_ulong,
            0,
            0,
            0,
        ) < 0
        {
            fail(err, Step::DropCaps, 100, errno());
        }
        let mut header = CapHeader {
            version: LINUX_CAPABILITY_VERSION_3,
            pid: 0,
        };
        let data = [CapData::default(); 2];
        if libc::syscall(
            libc::SYS_capset,
            &mut header as *mut CapHeader,
            data.as_ptr(),
        ) < 0
        {
            fail(err, Step::DropCaps, 101, errno());
        }
    }
}
