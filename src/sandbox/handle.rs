//! The handle of a started server ([`SandboxedChild`]): its pid and pidfd,
//! its pipes, what confines it, waiting for it and making sure nothing it
//! started is left; and rootfence as the subreaper of what a server without
//! namespaces leaves behind.

use std::io::{self, Read};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{ChildStderr, ChildStdin, ChildStdout, ExitStatus};
use std::sync::{Mutex, OnceLock};

use super::cgroup::Cgroup;
use super::coverage::{DomainRung, Rung};
use super::scratch::Scratch;
use super::seccomp::{self, FilterPolicy, supervisor};

/// What a started server is confined by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confinement {
    /// The sandbox of `rung` is in place: the Landlock ruleset (on the
    /// rungs that have it) was applied by the server's own thread before
    /// `exec` (the kernel accepted `landlock_restrict_self`), handling every
    /// right of `abi`; the seccomp filter is loaded; with namespaces the
    /// server sees only its grants; capabilities are dropped when rootfence
    /// had any.
    Enforced {
        /// The rung of isolation the server runs at.
        rung: Rung,
        /// The Landlock ABI whose every right is handled (0 without
        /// Landlock).
        abi: u32,
        /// Path rules in the ruleset, those made in the child included.
        path_rules: usize,
        /// What the seccomp filter allows beyond its fixed list.
        filter: FilterPolicy,
        /// What became of rootfence's capabilities.
        capabilities: CapabilityOutcome,
        /// Network by domain's design, when the plan lists domains.
        domains: Option<DomainRung>,
    },
    /// No sandbox (`--unconfined-i-know-this-is-unsafe`).
    Unconfined,
}

impl Confinement {
    /// Whether the server runs in its own namespaces.
    pub fn namespaces(&self) -> bool {
        matches!(
            self,
            Confinement::Enforced {
                rung: Rung::Full | Rung::ViewSeccomp,
                ..
            }
        )
    }
}

impl std::fmt::Display for Confinement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let Confinement::Enforced {
            rung,
            abi,
            path_rules,
            filter,
            capabilities,
            domains,
        } = self
        else {
            return f.write_str("UNCONFINED: no sandbox");
        };
        write!(f, "{rung}: ")?;
        if *abi > 0 {
            write!(
                f,
                "Landlock ABI {abi} fully enforced ({path_rules} path rules), "
            )?;
        } else {
            f.write_str("NO Landlock (this kernel has none; accepted by [isolation] landlock = \"prefer\"), ")?;
        }
        write!(
            f,
            "seccomp allow-list loaded (udp {}, unix socket() {}, tcp {}, listen {}), {}, capabilities {}",
            if filter.udp { "allowed" } else { "refused" },
            if filter.deny_unix {
                "refused"
            } else {
                "allowed"
            },
            match domains {
                Some(DomainRung::NetworkNamespace) =>
                    "to rootfence's network proxy only (the server's own network namespace)",
                Some(DomainRung::SupervisedConnect) =>
                    "to rootfence's network proxy only (connect() supervised)",
                None if filter.deny_inet => "refused",
                None => "by port",
            },
            match filter.listen {
                seccomp::Listen::Refused => "refused",
                seccomp::Listen::Supervised => "on granted ports and unix sockets only",
            },
            if self.namespaces() {
                "own namespaces (mount, pid, ipc; user unless root) with a filesystem view of the grants only"
            } else {
                "NO namespaces (this kernel or user cannot create them; see `rootfence doctor`)"
            },
            match capabilities {
                CapabilityOutcome::NoneHeld => "none held",
                CapabilityOutcome::Dropped => "dropped",
                CapabilityOutcome::BoundingSetKept =>
                    "dropped except the bounding set (root without CAP_SETPCAP)",
            }
        )
    }
}

/// What the server got of rootfence's capabilities.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CapabilityOutcome {
    /// rootfence held none.
    NoneHeld,
    /// All dropped: effective, permitted, inheritable, ambient and bounding.
    Dropped,
    /// Dropped, but the bounding set could not be emptied (root without
    /// `CAP_SETPCAP`): `exec` gives root the bounding set back.
    BoundingSetKept,
}

/// Pids of the sandboxed processes rootfence has started and not reaped
/// (the processes it waits for), so that an orphan sweep never touches them.
static LIVE: Mutex<Vec<libc::pid_t>> = Mutex::new(Vec::new());

pub(super) fn live_add(pid: libc::pid_t) {
    if let Ok(mut l) = LIVE.lock() {
        l.push(pid);
    }
}

fn live_remove(pid: libc::pid_t) {
    if let Ok(mut l) = LIVE.lock() {
        l.retain(|p| *p != pid);
    }
}

/// A running server.
///
/// With namespaces (see [`Confinement`]), the process rootfence holds is
/// the init of the server's PID namespace: when the server exits, the init
/// exits, and the kernel kills every process left in the namespace before
/// the init's exit is seen ([`wait`](Self::wait) returns): no descendant
/// outlives the server. Without namespaces, the process is the server;
/// what is left of its process group is killed when it exits, and
/// descendants that left the group are killed by `sweep_orphans` when
/// rootfence is their subreaper.
///
/// Dropping the handle kills the server (and with namespaces everything it
/// started) if it has not been waited for, reaps it, and removes its
/// cgroup and scratch directory.
#[derive(Debug)]
pub struct SandboxedChild {
    pub(super) pid: libc::pid_t,
    pub(super) pidfd: OwnedFd,
    pub(super) status_r: Option<OwnedFd>,
    pub(super) stdin: Option<OwnedFd>,
    pub(super) stdout: Option<OwnedFd>,
    pub(super) stderr: Option<OwnedFd>,
    pub(super) scratch: Option<Scratch>,
    /// Without namespaces, the directory of the server's `/dev/shm`.
    pub(super) shm: Option<Scratch>,
    /// The server's own cgroup, removed once it has ended.
    pub(super) cgroup: Option<Cgroup>,
    pub(super) confinement: Confinement,
    pub(super) namespaces: bool,
    pub(super) status: Option<ExitStatus>,
    pub(super) supervisor: Option<supervisor::Supervisor>,
    pub(super) watch: crate::roots::planted::Watch,
    pub(super) planted: Vec<crate::roots::planted::Planted>,
    /// Network by domain: the proxy, stopped with the handle.
    pub(super) net: Option<crate::netproxy::Proxy>,
    /// The server's own store, for saying at its end what it wrote there.
    pub(super) kept: Option<crate::store::Kept>,
}

impl SandboxedChild {
    /// The process rootfence waits for and signals: the server, or with
    /// namespaces the init of its PID namespace.
    pub fn pid(&self) -> u32 {
        self.pid as u32
    }

    /// The server's own process id as rootfence sees it (with namespaces,
    /// the init's child; looked up in `/proc`). `None` once it has exited.
    pub fn server_pid(&self) -> Option<u32> {
        if !self.namespaces {
            return Some(self.pid as u32);
        }
        let children =
            std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", self.pid)).ok()?;
        children.split_whitespace().next()?.parse().ok()
    }

    /// Whether the server runs in its own namespaces.
    pub fn namespaces(&self) -> bool {
        self.namespaces
    }

    /// What the server is confined by.
    pub fn confinement(&self) -> &Confinement {
        &self.confinement
    }

    /// The system calls the sandbox refused so far, when the plan asked for
    /// them to be reported ([`crate::plan::SandboxPlan::report_refusals`]).
    pub fn refused_calls(&self) -> Vec<supervisor::Refused> {
        self.supervisor
            .as_ref()
            .map(supervisor::Supervisor::refused)
            .unwrap_or_default()
    }

    /// What observing the server saw so far (the paths the sandbox refused
    /// it), when the plan asked for it to be observed
    /// ([`crate::plan::SandboxPlan::observe_paths`]); `None` otherwise.
    pub fn observed(&self) -> Option<super::observed::Observed> {
        self.supervisor.as_ref()?.observed()
    }

    /// Each path the sandbox refuses the server as it is seen (those seen
    /// already first), when the plan asked for it to be observed; `None`
    /// otherwise.
    pub fn watch_refusals(&self) -> Option<std::sync::mpsc::Receiver<super::observed::Seen>> {
        self.supervisor.as_ref()?.watch()
    }

    /// The network proxy's refusals to tell the host (network by domain;
    /// see `crate::netproxy::Proxy::take_notes`); `None` without a proxy
    /// or once taken.
    pub fn take_network_notes(&self) -> Option<tokio::sync::mpsc::UnboundedReceiver<String>> {
        self.net.as_ref()?.take_notes()
    }

    /// What the network proxy decided so far (network by domain), oldest
    /// first; empty without one.
    pub fn network_decisions(&self) -> Vec<crate::netproxy::Judged> {
        self.net
            .as_ref()
            .map(crate::netproxy::Proxy::judged)
            .unwrap_or_default()
    }

    /// The server's scratch directory (its `TMPDIR`), if the plan has one.
    pub fn scratch_dir(&self) -> Option<&Path> {
        self.scratch.as_ref().map(Scratch::path)
    }

    /// Take the server's stdin pipe (when [`StdioConfig`](super::StdioConfig) piped it). Wrap
    /// it for tokio with `tokio::process::ChildStdin::from_std`.
    pub fn take_stdin(&mut self) -> Option<ChildStdin> {
        self.stdin.take().map(ChildStdin::from)
    }

    /// Take the server's stdout pipe.
    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.stdout.take().map(ChildStdout::from)
    }

    /// Take the server's stderr pipe.
    pub fn take_stderr(&mut self) -> Option<ChildStderr> {
        self.stderr.take().map(ChildStderr::from)
    }

    /// Send `signal` to the server (with namespaces, through its init,
    /// which passes `SIGTERM`, `SIGINT`, `SIGHUP`, `SIGQUIT`, `SIGUSR1` and
    /// `SIGUSR2` on; `SIGKILL` ends the init and so the whole namespace).
    pub fn signal(&self, signal: i32) -> io::Result<()> {
        if self.status.is_some() {
            return Ok(());
        }
        if let Err(e) = super::pidfd::signal(&self.pidfd, signal) {
            if e.raw_os_error() == Some(libc::ESRCH) {
                return Ok(());
            }
            return Err(e);
        }
        Ok(())
    }

    /// Kill the server with `SIGKILL`.
    pub fn kill(&mut self) -> io::Result<()> {
        self.signal(libc::SIGKILL)
    }

    /// Wait for the server to exit (blocking), make sure nothing it started
    /// is left, reap it, then remove its scratch directory. From async code
    /// call it in `spawn_blocking`.
    pub fn wait(&mut self) -> io::Result<ExitStatus> {
        if let Some(s) = self.status {
            return Ok(s);
        }
        if let Some(status) = self.read_status() {
            // The init wrote it after every process of the namespace was
            // gone; its own exit (the namespaces torn down) is reaped in
            // the background, or now when it holds the server's cgroup
            // until it exits (which is removed then).
            let pid = self.pid;
            if self.cgroup.as_ref().is_some_and(Cgroup::held_until_exit) {
                // SAFETY: reaping our own child.
                unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
                live_remove(pid);
                self.status = Some(status);
                self.finish();
                return Ok(status);
            }
            let _ = std::thread::Builder::new()
                .name("rootfence-reap".into())
                .spawn(move || {
                    // SAFETY: reaping our own child.
                    unsafe { libc::waitpid(pid, std::ptr::null_mut(), 0) };
                    live_remove(pid);
                });
            self.status = Some(status);
            self.finish();
            return Ok(status);
        }
        self.exited(true)?;
        Ok(self.reap())
    }

    /// With namespaces: block until the init reports the server's status
    /// (written once nothing of the server is left), or closes the pipe
    /// without one (it died).
    fn read_status(&mut self) -> Option<ExitStatus> {
        let r = self.status_r.take()?;
        let mut f = std::fs::File::from(r);
        let mut b = [0u8; 4];
        f.read_exact(&mut b).ok()?;
        Some(ExitStatus::from_raw(i32::from_ne_bytes(b)))
    }

    /// What the server left in its writable roots that tools outside would
    /// run (known once it has exited; see `crate::roots::planted`).
    pub fn planted(&self) -> &[crate::roots::planted::Planted] {
        &self.planted
    }

    /// Once the server is gone: what it left in its roots is looked at
    /// (and reported), its cgroup (with anything left in it) and the
    /// scratch directory removed.
    fn finish(&mut self) {
        drop(self.cgroup.take());
        self.planted = self.watch.after();
        for p in &self.planted {
            tracing::warn!(
                target: "audit",
                "the server left version-control or editor metadata that tools outside run unasked: {p}; look at it before running git, your editor or direnv there"
            );
        }
        if let Some(report) = self.kept.take().and_then(|k| k.report()) {
            tracing::warn!("{report}");
        }
        for s in [self.scratch.take(), self.shm.take()].into_iter().flatten() {
            let dir = s.path().to_path_buf();
            if let Err(e) = s.remove() {
                tracing::warn!(
                    "cannot remove the scratch directory {}: {e}; remove it by hand",
                    dir.display()
                );
            }
        }
    }

    /// Whether the server has exited, without blocking; once it has, kills
    /// what is left of it, reaps it and removes the scratch directory.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        if let Some(s) = self.status {
            return Ok(Some(s));
        }
        if !self.exited(false)? {
            return Ok(None);
        }
        Ok(Some(self.reap()))
    }

    /// Whether the process has exited (blocking until it has when
    /// `block`), without reaping it: while it is a zombie its pid, which is
    /// also its process group's id, cannot be reused.
    fn exited(&self, block: bool) -> io::Result<bool> {
        loop {
            // SAFETY: waitid writes into the zeroed siginfo.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            let flags = libc::WEXITED | libc::WNOWAIT | if block { 0 } else { libc::WNOHANG };
            // SAFETY: valid pointer to a siginfo_t; our own pidfd.
            let r = unsafe {
                libc::waitid(
                    libc::P_PIDFD,
                    self.pidfd.as_raw_fd() as libc::id_t,
                    &mut info,
                    flags,
                )
            };
            if r == 0 {
                // SAFETY: si_pid is valid for a waitid result; 0 means no
                // child has changed state (WNOHANG).
                return Ok(unsafe { info.si_pid() } != 0);
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e);
            }
        }
    }

    /// After the exit was seen: kill what is left, reap, read the server's
    /// status, remove the scratch directory.
    fn reap(&mut self) -> ExitStatus {
        if !self.namespaces {
            // SAFETY: kill has no memory arguments; the group id is the pid
            // of our unreaped child, which cannot have been reused.
            unsafe {
                libc::kill(-self.pid, libc::SIGKILL);
            }
        }
        let mut raw = 0;
        loop {
            // SAFETY: reaping our own exited child.
            let r = unsafe { libc::waitpid(self.pid, &mut raw, 0) };
            if r >= 0 || io::Error::last_os_error().kind() != io::ErrorKind::Interrupted {
                break;
            }
        }
        live_remove(self.pid);
        let mut status = ExitStatus::from_raw(raw);
        if let Some(r) = self.status_r.take() {
            let mut f = std::fs::File::from(r);
            let mut b = [0u8; 4];
            if f.read_exact(&mut b).is_ok() {
                status = ExitStatus::from_raw(i32::from_ne_bytes(b));
            }
        }
        self.status = Some(status);
        self.finish();
        if !self.namespaces {
            sweep_orphans();
        }
        status
    }
}

impl Drop for SandboxedChild {
    fn drop(&mut self) {
        if self.status.is_none() {
            let _ = self.signal(libc::SIGKILL);
            if self.exited(true).is_ok() {
                self.reap();
            }
        }
    }
}

/// Whether [`enable_subreaper`] was called.
static SUBREAPER: OnceLock<()> = OnceLock::new();

/// Make this process the subreaper of everything it starts: a server's
/// descendant whose parent exits is re-parented to rootfence instead of
/// the system's init, so that [`sweep_orphans`] can end it. For the
/// command-line tool (`run`, `exec`); a library user that reaps its own
/// children should not call it.
pub fn enable_subreaper() {
    // SAFETY: prctl with integer arguments.
    if unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) } == 0 {
        let _ = SUBREAPER.set(());
    }
}

/// Kill and reap every child of this process that is not a server
/// rootfence is waiting for: without namespaces, the descendants a server
/// left behind (re-parented to rootfence, see [`enable_subreaper`]). Runs
/// until none is left (a killed process's own children are re-parented
/// to rootfence in turn). Does nothing unless [`enable_subreaper`] was
/// called.
pub fn sweep_orphans() {
    if SUBREAPER.get().is_none() {
        return;
    }
    // SAFETY: getpid cannot fail.
    let me = unsafe { libc::getpid() };
    for _ in 0..1000 {
        let live = LIVE.lock().map(|l| l.clone()).unwrap_or_default();
        let orphans: Vec<libc::pid_t> = children_of(me)
            .into_iter()
            .filter(|p| !live.contains(p))
            .collect();
        if orphans.is_empty() {
            return;
        }
        for p in &orphans {
            // SAFETY: kill and waitpid on our own (unreaped) children.
            unsafe {
                libc::kill(*p, libc::SIGKILL);
                libc::waitpid(*p, std::ptr::null_mut(), 0);
            }
        }
    }
}

/// The pids whose parent is a thread of `me` (each thread's `children`
/// file; a process re-parented to a subreaper becomes the child of one of
/// its threads).
fn children_of(me: libc::pid_t) -> Vec<libc::pid_t> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{me}/task")) else {
        return out;
    };
    for t in tasks.flatten() {
        let Ok(list) = std::fs::read_to_string(t.path().join("children")) else {
            continue;
        };
        out.extend(
            list.split_whitespace()
                .filter_map(|p| p.parse::<libc::pid_t>().ok()),
        );
    }
    out
}
