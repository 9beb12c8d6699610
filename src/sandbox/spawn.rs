//! [`spawn`]: start a server under the sandbox a plan describes.

use std::ffi::{CString, OsStr, OsString};
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ChildStderr, ChildStdin, ChildStdout, ExitStatus};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};

use super::child::{
    self, ChildRule, ChildSetup, DropCaps, ExecImage, LandlockChild, MOUNT_ATTR_NODEV,
    MOUNT_ATTR_NOEXEC, MOUNT_ATTR_NOSUID, MOUNT_ATTR_RDONLY, NsChild, ViewOp,
};
use super::scratch::Scratch;
use super::seccomp::{self, FilterPolicy, supervisor};
use super::view::{self, Op};
use super::{SandboxError, landlock, losses, probe};
use crate::plan::{NamespaceMode, SandboxPlan};

/// Where one of the server's standard streams goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Stdio {
    /// rootfence's own descriptor.
    #[default]
    Inherit,
    /// A new pipe; rootfence keeps the other end.
    Piped,
    /// `/dev/null`.
    Null,
}

/// Where the server's standard streams go. Defaults to inheriting
/// rootfence's.
#[derive(Debug, Clone, Copy, Default)]
pub struct StdioConfig {
    /// Standard input.
    pub stdin: Stdio,
    /// Standard output.
    pub stdout: Stdio,
    /// Standard error.
    pub stderr: Stdio,
}

impl StdioConfig {
    /// stdin and stdout piped (the MCP stream), stderr inherited.
    pub fn piped() -> Self {
        StdioConfig {
            stdin: Stdio::Piped,
            stdout: Stdio::Piped,
            stderr: Stdio::Inherit,
        }
    }

    /// All three piped.
    pub fn all_piped() -> Self {
        StdioConfig {
            stdin: Stdio::Piped,
            stdout: Stdio::Piped,
            stderr: Stdio::Piped,
        }
    }
}

/// What a started server is confined by.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confinement {
    /// The Landlock ruleset was applied by the server's own thread before
    /// `exec` (the kernel accepted `landlock_restrict_self`), handling every
    /// right of `abi`; the seccomp filter is loaded; capabilities are
    /// dropped when rootfence had any.
    Enforced {
        /// The Landlock ABI whose every right is handled.
        abi: u32,
        /// Path rules in the ruleset, those made in the child included.
        path_rules: usize,
        /// What the seccomp filter allows beyond its fixed list.
        filter: FilterPolicy,
        /// What became of rootfence's capabilities.
        capabilities: CapabilityOutcome,
        /// The server runs in its own user, mount, PID and IPC namespaces,
        /// seeing only what the plan grants.
        namespaces: bool,
    },
    /// No sandbox (`--unconfined-i-know-this-is-unsafe`).
    Unconfined,
}

impl std::fmt::Display for Confinement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Confinement::Enforced {
                abi,
                path_rules,
                filter,
                capabilities,
                namespaces,
            } => write!(
                f,
                "Landlock ABI {abi} fully enforced ({path_rules} path rules), seccomp allow-list loaded (udp {}, unix socket() {}, listen {}), {}, capabilities {}",
                if filter.udp { "allowed" } else { "refused" },
                if filter.deny_unix {
                    "refused"
                } else {
                    "allowed"
                },
                match filter.listen {
                    seccomp::Listen::Refused => "refused",
                    seccomp::Listen::Supervised => "on granted ports and unix sockets only",
                },
                if *namespaces {
                    "own namespaces (user, mount, pid, ipc) with a filesystem view of the grants only"
                } else {
                    "NO namespaces (this kernel or user cannot create them; see `rootfence doctor`)"
                },
                match capabilities {
                    CapabilityOutcome::NoneHeld => "none held",
                    CapabilityOutcome::Dropped => "dropped",
                    CapabilityOutcome::BoundingSetKept =>
                        "dropped except the bounding set (root without CAP_SETPCAP)",
                }
            ),
            Confinement::Unconfined => f.write_str("UNCONFINED: no sandbox"),
        }
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

fn live_add(pid: libc::pid_t) {
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
/// descendants that left the group are killed by [`sweep_orphans`] when
/// rootfence is their subreaper.
///
/// Dropping the handle kills the server (and with namespaces everything it
/// started) if it has not been waited for, reaps it, and removes its
/// scratch directory.
#[derive(Debug)]
pub struct SandboxedChild {
    pid: libc::pid_t,
    pidfd: OwnedFd,
    status_r: Option<OwnedFd>,
    stdin: Option<OwnedFd>,
    stdout: Option<OwnedFd>,
    stderr: Option<OwnedFd>,
    scratch: Option<Scratch>,
    confinement: Confinement,
    namespaces: bool,
    status: Option<ExitStatus>,
    supervisor: Option<supervisor::Supervisor>,
    watch: crate::roots::planted::Watch,
    planted: Vec<crate::roots::planted::Planted>,
    /// Network by domain: the proxy, stopped with the server.
    net: Option<crate::netproxy::Proxy>,
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
    /// them to be reported ([`SandboxPlan::report_refusals`]).
    pub fn refused_calls(&self) -> Vec<supervisor::Refused> {
        self.supervisor
            .as_ref()
            .map(supervisor::Supervisor::refused)
            .unwrap_or_default()
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

    /// Take the server's stdin pipe (when [`StdioConfig`] piped it). Wrap
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
        // SAFETY: pidfd_send_signal on our own pidfd, no info struct.
        let r = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.pidfd.as_raw_fd(),
                signal,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
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
            // the background.
            let pid = self.pid;
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
    /// run (known once it has exited; see [`crate::roots::planted`]).
    pub fn planted(&self) -> &[crate::roots::planted::Planted] {
        &self.planted
    }

    /// Once the server is gone: what it left in its roots is looked at
    /// (and reported), and the scratch directory removed.
    fn finish(&mut self) {
        self.planted = self.watch.after();
        for p in &self.planted {
            tracing::warn!(
                target: "audit",
                "the server left version-control or editor metadata that tools outside run unasked: {p}; look at it before running git, your editor or direnv there"
            );
        }
        if let Some(s) = self.scratch.take()
            && let Err(e) = s.remove()
        {
            tracing::warn!("cannot remove the scratch directory: {e}; remove it by hand");
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

/// Start the server `plan` describes, confined.
///
/// Everything is prepared in the calling process: the Landlock ruleset
/// (every path opened, roots from their handles), the seccomp program, the
/// scratch directory, the filesystem view's mount operations, argv and the
/// environment (exactly the plan's, plus `TMPDIR`). The `clone` happens on
/// the main thread when called there, else on a dedicated long-lived
/// launcher thread, so the parent-death signal (which Linux ties to the
/// thread that cloned) does not fire when a short-lived caller thread (a
/// tokio blocking thread) exits. Between `clone` and `exec` the child runs
/// only raw system calls (see the `child` module). Safe to call from any
/// thread, including inside a multi-threaded tokio runtime; it blocks
/// until the server has been exec'd (a few milliseconds).
///
/// # Security
///
/// Fails closed: if the kernel cannot enforce what the plan needs (the
/// fatal entries of [`losses`]), or any rule cannot be built, or any step in
/// the child fails, nothing is executed and an error says what is missing.
/// On `Ok`, the server runs in a new session without a controlling
/// terminal, with `no_new_privs`, `RLIMIT_CORE` 0, the parent-death signal
/// `SIGKILL`, no descriptor but 0, 1 and 2, no capabilities, under the
/// Landlock ruleset (every filesystem right of the kernel's ABI handled;
/// TCP by port; the plan's scopes) and the seccomp filter; with namespaces
/// also in its own PID namespace (nothing it starts outlives it) and a
/// filesystem view holding only the plan's grants.
pub fn spawn(plan: &SandboxPlan, stdio: StdioConfig) -> Result<SandboxedChild, SandboxError> {
    launch(plan, stdio, true)
}

/// Start the server with no sandbox: the same environment, session,
/// descriptor hygiene and scratch directory as [`spawn`], but no Landlock,
/// no seccomp, no namespaces and no capability drop.
///
/// # Security
///
/// The server can do anything rootfence's user can. Only for
/// `--unconfined-i-know-this-is-unsafe`.
pub fn spawn_unconfined(
    plan: &SandboxPlan,
    stdio: StdioConfig,
) -> Result<SandboxedChild, SandboxError> {
    launch(plan, stdio, false)
}

/// The base directory of the view's first `pivot_root`: any existing
/// directory of the host works; the system's `/tmp` is the usual one.
const VIEW_BASE: &str = "/tmp";

/// A pipe, both ends close-on-exec.
fn pipe() -> Result<(OwnedFd, OwnedFd), SandboxError> {
    rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)
        .map_err(|e| SandboxError::Launcher(e.into()))
}

/// `fd` duplicated to a number above 2 (close-on-exec), so installing the
/// standard streams in the child never overwrites a source.
fn above_stdio(fd: OwnedFd) -> Result<OwnedFd, SandboxError> {
    if fd.as_raw_fd() > 2 {
        return Ok(fd);
    }
    rustix::io::fcntl_dupfd_cloexec(&fd, 3).map_err(|e| SandboxError::Launcher(e.into()))
}

fn cstring(s: &OsStr, what: &str) -> Result<CString, SandboxError> {
    CString::new(s.as_bytes()).map_err(|_| {
        SandboxError::Launcher(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("{what} contains a NUL byte: {}", s.to_string_lossy()),
        ))
    })
}

fn cpath(prefix: &str, p: &Path) -> Result<CString, SandboxError> {
    let mut v = prefix.as_bytes().to_vec();
    v.extend_from_slice(p.as_os_str().as_bytes());
    cstring(OsStr::from_bytes(&v), "a path")
}

/// What the parent keeps of a launch until it is over.
struct Parent {
    child_ends: Vec<OwnedFd>,
    sync_w: Option<OwnedFd>,
    err_r: OwnedFd,
}

/// How a launch is attempted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Mode {
    namespaces: bool,
    overlays: bool,
}

/// What earlier launches of this process found: 0 nothing yet, 1 the
/// namespaces work, 2 the kernel refuses them, 3 they work without overlays.
static NS_STATE: AtomicU8 = AtomicU8::new(0);

/// Why an attempt failed.
enum AttemptError {
    /// For good.
    Fatal(SandboxError),
    /// The kernel refused something the attempt asked for that a weaker
    /// mode does without.
    Downgrade { to: Mode, why: String },
}

impl From<SandboxError> for AttemptError {
    fn from(e: SandboxError) -> Self {
        AttemptError::Fatal(e)
    }
}

fn launch(
    plan: &SandboxPlan,
    stdio: StdioConfig,
    confine: bool,
) -> Result<SandboxedChild, SandboxError> {
    let want = confine && plan.namespaces != NamespaceMode::Off;
    let mut mode = match NS_STATE.load(Ordering::Relaxed) {
        2 => Mode {
            namespaces: false,
            overlays: false,
        },
        3 => Mode {
            namespaces: want,
            overlays: false,
        },
        _ => Mode {
            namespaces: want,
            overlays: want,
        },
    };
    if want && !mode.namespaces && plan.namespaces == NamespaceMode::Require {
        return Err(SandboxError::CannotEnforce {
            missing: vec![format!(
                "[isolation] namespaces = \"require\", but {}",
                probe::namespaces().why_not()
            )],
        });
    }
    loop {
        match attempt(plan, stdio, confine, mode) {
            Ok(c) => {
                if mode.namespaces {
                    let _ = NS_STATE.compare_exchange(0, 1, Ordering::Relaxed, Ordering::Relaxed);
                }
                return Ok(c);
            }
            Err(AttemptError::Fatal(e)) => return Err(e),
            Err(AttemptError::Downgrade { to, why }) => {
                if to.namespaces != mode.namespaces && plan.namespaces == NamespaceMode::Require {
                    return Err(SandboxError::CannotEnforce {
                        missing: vec![format!("[isolation] namespaces = \"require\", but {why}")],
                    });
                }
                if to.namespaces {
                    tracing::warn!(
                        "private layers for caches are not available ({why}): the server gets empty private caches instead"
                    );
                    NS_STATE.store(3, Ordering::Relaxed);
                } else {
                    tracing::warn!(
                        "the server runs WITHOUT namespaces ({why}): no filesystem view, and processes it starts are ended by rootfence instead of the kernel; see `rootfence doctor` for what stays open"
                    );
                    NS_STATE.store(2, Ordering::Relaxed);
                }
                mode = to;
            }
        }
    }
}

fn attempt(
    plan: &SandboxPlan,
    stdio: StdioConfig,
    confine: bool,
    mode: Mode,
) -> Result<SandboxedChild, AttemptError> {
    let namespaces = mode.namespaces;
    let scratch = if plan.scratch {
        Some(Scratch::create()?)
    } else {
        None
    };
    // SAFETY: getpid cannot fail.
    let parent_pid = unsafe { libc::getpid() };
    let caps = probe();
    // The environment: the plan's, TMPDIR, and (without namespaces) the
    // private caches pointed at empty directories in scratch.
    let mut env: Vec<(OsString, OsString)> = plan
        .env
        .iter()
        .map(|(k, (v, _))| (OsString::from(k), OsString::from(v)))
        .collect();
    if let Some(s) = &scratch {
        env.push(("TMPDIR".into(), s.path().into()));
        for f in &plan.scratch_files {
            let path = s.path().join(&f.name);
            std::fs::write(&path, &f.content).map_err(|source| SandboxError::Scratch {
                dir: path.clone(),
                source,
            })?;
            env.retain(|(k, _)| k != f.env.as_str());
            env.push((f.env.clone().into(), path.into()));
        }
    }
    let mut layers: Vec<(PathBuf, PathBuf)> = Vec::new();
    for (i, layer) in plan.private_layers.iter().enumerate() {
        let Some(s) = &scratch else { break };
        let dir = s.path().join(format!(".rootfence-layer-{i}"));
        if mode.overlays && layer.path.is_dir() && overlay_safe(&layer.path) && overlay_safe(&dir) {
            for sub in ["upper", "work"] {
                std::fs::create_dir_all(dir.join(sub)).map_err(|source| SandboxError::Scratch {
                    dir: dir.clone(),
                    source,
                })?;
            }
            layers.push((layer.path.clone(), dir));
        } else if let Some(var) = &layer.env {
            std::fs::create_dir_all(&dir).map_err(|source| SandboxError::Scratch {
                dir: dir.clone(),
                source,
            })?;
            env.retain(|(k, _)| k != var.as_str());
            env.push((var.into(), dir.into()));
        }
    }

    // Network by domain (netns.rs): the proxy's rung, its variables, and
    // the network Landlock and seccomp apply.
    let net = super::netns::Net::prepare(plan, confine, namespaces, caps.abi())?;
    if let Some(n) = &net {
        n.set_env(&mut env);
    }
    let launched = super::netns::launch_plan(net.as_ref(), plan, caps.abi());
    let plan: &SandboxPlan = &launched;

    let mut setup_landlock = None;
    let mut rule_paths: Vec<PathBuf> = Vec::new();
    let mut view: Option<(Vec<ViewOp>, Vec<Target>)> = None;
    let mut setup_seccomp = None;
    let mut drop_caps = None;
    let mut ruleset = None;
    let mut supervised: Option<supervisor::Rules> = None;
    let confinement = if confine {
        let fatal: Vec<String> = losses(plan, &caps)
            .into_iter()
            .filter(|l| l.fatal)
            .map(|l| format!("{} needs {}", l.wants, l.missing))
            .collect();
        if !fatal.is_empty() {
            return Err(SandboxError::CannotEnforce { missing: fatal }.into());
        }
        let prepared = landlock::prepare(
            plan,
            scratch.as_ref().map(Scratch::path),
            caps.abi(),
            namespaces,
        )?;
        let mut filter = FilterPolicy::for_plan(&plan.network, prepared.abi, namespaces);
        filter.report = plan.report_refusals;
        if let Some(n) = &net {
            n.adjust_filter(&mut filter);
        }
        setup_seccomp = Some(seccomp::compile(filter)?);
        if filter.needs_supervisor() {
            supervised = Some(supervisor::Rules {
                table: seccomp::entries(&filter),
                tcp_bind: plan.network.tcp_bind.clone(),
                proxy: net.as_ref().and_then(super::netns::Net::supervised_address),
            });
        }
        let mut copy_dirs: Vec<PathBuf> = Vec::new();
        if namespaces {
            let v = view_ops(
                plan,
                scratch.as_ref().map(Scratch::path),
                &layers,
                &prepared.opened,
            )?;
            for t in &v.1 {
                if t.1 == OpKind::Copy
                    && let Some(d) = t.0.parent()
                    && !copy_dirs.iter().any(|c| c == d)
                {
                    copy_dirs.push(d.to_path_buf());
                }
            }
            view = Some(v);
        }
        let mut rules = Vec::new();
        if namespaces {
            rules.push(ChildRule {
                path: c"/proc".to_owned(),
                access: prepared.proc_access,
            });
            for (path, _) in &layers {
                rules.push(ChildRule {
                    path: cpath("", path)?,
                    access: prepared.private_access,
                });
            }
            // The private home is a new inode of the view's own.
            if let Some(h) = private_home(plan) {
                rules.push(ChildRule {
                    path: cpath("", &h)?,
                    access: prepared.home_access,
                });
            }
            // Files copied into the view are new inodes: their directories
            // (which hold only what the plan grants) are readable.
            for dir in &copy_dirs {
                rules.push(ChildRule {
                    path: cpath("", dir)?,
                    access: prepared.read_access,
                });
            }
        } else if prepared.proc_access != 0 {
            rules.push(ChildRule {
                path: c"/proc/self".to_owned(),
                access: prepared.proc_access,
            });
        }
        rule_paths = rules
            .iter()
            .map(|r| PathBuf::from(OsStr::from_bytes(r.path.as_bytes())))
            .collect();
        let path_rules = prepared.path_rules + rules.len();
        setup_landlock = Some(LandlockChild {
            ruleset: prepared.fd.as_raw_fd(),
            rules,
        });
        let caps_held = child::cap_state();
        let capabilities = match (
            caps_held.must_drop || namespaces,
            caps_held.root,
            caps_held.can_drop_bounding || namespaces,
        ) {
            (false, _, _) => CapabilityOutcome::NoneHeld,
            (true, true, false) => CapabilityOutcome::BoundingSetKept,
            (true, _, _) => CapabilityOutcome::Dropped,
        };
        if caps_held.must_drop || namespaces {
            if caps_held.root && !caps_held.can_drop_bounding && !namespaces {
                tracing::warn!(
                    "rootfence runs as root without CAP_SETPCAP: the capability bounding set cannot be emptied, so the server gets the bounding set's capabilities back at exec; run rootfence as an unprivileged user"
                );
            }
            drop_caps = Some(DropCaps {
                // The kernel's CAP_LAST_CAP is lower (40 on Linux 6.18);
                // the child stops at the first unknown capability. In its
                // own user namespace the server holds CAP_SETPCAP there.
                last_cap: 63,
                bounding: caps_held.can_drop_bounding || namespaces,
            });
        }
        let c = Confinement::Enforced {
            abi: prepared.abi,
            path_rules,
            filter,
            capabilities,
            namespaces,
        };
        ruleset = Some(prepared);
        c
    } else {
        Confinement::Unconfined
    };

    let program = plan.command.program.clone();
    let exec = ExecImage::new(
        cstring(program.as_os_str(), "the program path")?,
        plan.command
            .argv
            .iter()
            .map(|a| cstring(a, "an argument"))
            .collect::<Result<_, _>>()?,
        env.iter()
            .map(|(k, v)| {
                let mut kv = k.clone().into_vec();
                kv.push(b'=');
                kv.extend_from_slice(v.as_bytes());
                cstring(OsStr::from_bytes(&kv), "an environment variable")
            })
            .collect::<Result<_, _>>()?,
    );

    // Standard streams.
    let mut parent_ends: [Option<OwnedFd>; 3] = [None, None, None];
    let mut child_ends: Vec<OwnedFd> = Vec::new();
    let mut stdio_fds: [Option<RawFd>; 3] = [None, None, None];
    for (i, which) in [stdio.stdin, stdio.stdout, stdio.stderr]
        .into_iter()
        .enumerate()
    {
        match which {
            Stdio::Inherit => {}
            Stdio::Null => {
                let f = std::fs::OpenOptions::new()
                    .read(i == 0)
                    .write(i != 0)
                    .open("/dev/null")
                    .map_err(SandboxError::Launcher)?;
                let fd = above_stdio(OwnedFd::from(f))?;
                stdio_fds[i] = Some(fd.as_raw_fd());
                child_ends.push(fd);
            }
            Stdio::Piped => {
                let (r, w) = pipe()?;
                let (mine, theirs) = if i == 0 { (w, r) } else { (r, w) };
                let theirs = above_stdio(theirs)?;
                stdio_fds[i] = Some(theirs.as_raw_fd());
                child_ends.push(theirs);
                parent_ends[i] = Some(mine);
            }
        }
    }

    let (err_r, err_w) = pipe()?;
    // The filter's listener comes back over this pair (sequenced packets,
    // so the descriptor arrives with its one byte or not at all).
    let notify = match supervised {
        Some(_) => {
            let (mine, theirs) = rustix::net::socketpair(
                rustix::net::AddressFamily::UNIX,
                rustix::net::SocketType::SEQPACKET,
                rustix::net::SocketFlags::CLOEXEC,
                None,
            )
            .map_err(|e| SandboxError::Launcher(e.into()))?;
            Some((mine, above_stdio(theirs)?))
        }
        None => None,
    };
    let mut ns_setup = None;
    let mut sync_w = None;
    let mut status_r = None;
    let mut view_targets: Vec<(PathBuf, OpKind)> = Vec::new();
    if namespaces {
        let (sr, sw) = pipe()?;
        let (str_, stw) = pipe()?;
        let (ops, targets) = view.take().unwrap_or_default();
        let n_ops = ops.len();
        view_targets = targets;
        let cwd = std::env::current_dir()
            .ok()
            .filter(|c| plan.grants.iter().any(|g| c.starts_with(&g.path)))
            .map(|c| cpath("", &c))
            .transpose()?;
        ns_setup = Some(NsChild {
            sync_r: sr.as_raw_fd(),
            status_w: stw.as_raw_fd(),
            base: cpath("", Path::new(VIEW_BASE))?,
            ops,
            cwd,
            // Writing the PID namespace's sysctl needs root's uid; without
            // it memfd files stay executable (see `doctor`).
            // SAFETY: geteuid cannot fail.
            memfd_noexec: !plan.exec_in_roots && unsafe { libc::geteuid() } == 0,
            server_stack: child::ServerStack::new().map_err(SandboxError::Launcher)?,
            tree_fds: (0..n_ops).map(|_| std::cell::Cell::new(-1)).collect(),
            net: net.as_ref().and_then(super::netns::Net::child),
        });
        child_ends.push(sr);
        child_ends.push(stw);
        sync_w = Some(sw);
        status_r = Some(str_);
    }
    let setup = ChildSetup {
        parent_pid,
        err_w: err_w.as_raw_fd(),
        stdio: stdio_fds,
        ns: ns_setup,
        landlock: setup_landlock,
        seccomp: setup_seccomp,
        notify_sock: notify.as_ref().map(|(_, t)| t.as_raw_fd()),
        drop_caps,
        exec,
    };
    child_ends.push(err_w);
    let notify_r = match notify {
        Some((mine, theirs)) => {
            child_ends.push(theirs);
            Some(mine)
        }
        None => None,
    };
    let parent = Parent {
        child_ends,
        sync_w,
        err_r,
    };
    // rootfence running as root needs no user namespace to make the
    // others (it holds CAP_SYS_ADMIN): the server's capabilities are
    // dropped before it runs all the same, and the maps round trip saved.
    // SAFETY: geteuid cannot fail.
    let as_root = unsafe { libc::geteuid() } == 0;
    let flags = if namespaces {
        (if as_root { 0 } else { libc::CLONE_NEWUSER }
            | libc::CLONE_NEWNS
            | libc::CLONE_NEWPID
            | libc::CLONE_NEWIPC) as u64
            | net.as_ref().map_or(0, super::netns::Net::clone_flags)
    } else {
        0
    };
    let maps = IdMaps::current();
    let started = on_launcher(move || {
        let r = clone_and_start(&setup, flags, parent, &maps);
        // The ruleset descriptor must outlive the clone; close it now.
        drop(ruleset);
        drop(setup);
        r
    })?;
    let (pid, pidfd) = match started {
        Ok(p) => p,
        Err(e) => return Err(classify(e, mode, &program, &view_targets, &rule_paths)),
    };
    live_add(pid);
    let supervisor = match (notify_r, supervised) {
        (Some(sock), Some(rules)) => {
            let started = receive_fd(&sock).and_then(|l| supervisor::Supervisor::start(l, rules));
            match started {
                Ok(s) => Some(s),
                Err(e) => {
                    // The server runs with calls nobody answers: end it.
                    let mut child = SandboxedChild {
                        pid,
                        pidfd,
                        status_r,
                        stdin: None,
                        stdout: None,
                        stderr: None,
                        scratch,
                        confinement,
                        namespaces,
                        status: None,
                        supervisor: None,
                        watch: crate::roots::planted::Watch::default(),
                        planted: Vec::new(),
                        net: None,
                    };
                    let _ = child.kill();
                    drop(child);
                    return Err(SandboxError::Launcher(io::Error::new(
                        e.kind(),
                        format!("cannot supervise the server's seccomp filter: {e}"),
                    ))
                    .into());
                }
            }
        }
        _ => None,
    };
    if scratch.is_some() {
        // Scratch directories of rootfences killed before they could
        // clean up: removed once per process, in the background.
        super::scratch::sweep_stale();
    }
    let [stdin, stdout, stderr] = parent_ends;
    let mut child = SandboxedChild {
        pid,
        pidfd,
        status_r,
        stdin,
        stdout,
        stderr,
        scratch,
        confinement,
        namespaces,
        status: None,
        supervisor,
        net: None,
        watch: if confine {
            crate::roots::planted::Watch::of(&plan.roots)
        } else {
            crate::roots::planted::Watch::default()
        },
        planted: Vec::new(),
    };
    // Network by domain (netns.rs): the proxy starts on its listener; if
    // it cannot, the server is killed (dropping its handle).
    if let Some(n) = net {
        child.net = Some(n.start().map_err(|e| {
            SandboxError::Launcher(io::Error::new(
                e.kind(),
                format!("cannot start the network proxy: {e}"),
            ))
        })?);
    }
    Ok(child)
}

/// The one descriptor the child sent on `sock` (already there: the child
/// sends it before `execve`).
fn receive_fd(sock: &OwnedFd) -> io::Result<OwnedFd> {
    let mut byte = [0u8; 1];
    let mut space = [std::mem::MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = rustix::net::RecvAncillaryBuffer::new(&mut space);
    let mut iov = [io::IoSliceMut::new(&mut byte)];
    rustix::net::recvmsg(
        sock,
        &mut iov,
        &mut control,
        rustix::net::RecvFlags::DONTWAIT | rustix::net::RecvFlags::CMSG_CLOEXEC,
    )
    .map_err(io::Error::from)?;
    for m in control.drain() {
        if let rustix::net::RecvAncillaryMessage::ScmRights(mut fds) = m
            && let Some(fd) = fds.next()
        {
            return Ok(fd);
        }
    }
    Err(io::Error::other("the child sent no seccomp listener"))
}

/// What a failed start means: a mode the kernel refuses (try a weaker one)
/// or an error.
fn classify(
    e: StartError,
    mode: Mode,
    program: &Path,
    targets: &[(PathBuf, OpKind)],
    rule_paths: &[PathBuf],
) -> AttemptError {
    let no_ns = |why: String| AttemptError::Downgrade {
        to: Mode {
            namespaces: false,
            overlays: false,
        },
        why,
    };
    match e {
        StartError::Os(what, source) if mode.namespaces && what != "read the child's report" => {
            no_ns(format!("{what}: {source}"))
        }
        StartError::Os(what, source) => AttemptError::Fatal(SandboxError::Spawn {
            program: program.to_path_buf(),
            source: io::Error::new(source.kind(), format!("{what}: {source}")),
        }),
        StartError::Child(step, detail, source) => {
            let target = targets.get(detail as usize);
            if mode.namespaces {
                match (step, target) {
                    (child::Step::MountPrivate | child::Step::ViewBase, _)
                    | (child::Step::ViewOp, Some((_, OpKind::Proc))) => {
                        return no_ns(format!("the sandbox could not {step}: {source}"));
                    }
                    (child::Step::ViewOp, Some((p, OpKind::Overlay))) if mode.overlays => {
                        return AttemptError::Downgrade {
                            to: Mode {
                                namespaces: true,
                                overlays: false,
                            },
                            why: format!("overlay on {}: {source}", p.display()),
                        };
                    }
                    _ => {}
                }
            }
            AttemptError::Fatal(SandboxError::ChildSetup {
                program: program.to_path_buf(),
                step,
                detail: match (step, target) {
                    (child::Step::ViewOp | child::Step::RootChanged, Some((p, _))) => {
                        format!(" ({})", p.display())
                    }
                    (child::Step::OpenChildRule | child::Step::ChildRule, _) => rule_paths
                        .get(detail as usize)
                        .map(|p| format!(" ({})", p.display()))
                        .unwrap_or_default(),
                    _ => String::new(),
                },
                source,
            })
        }
    }
}

/// A view operation's target and kind, for naming it in errors.
type Target = (PathBuf, OpKind);

/// The kind of a view operation, for telling a refused feature from an
/// error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OpKind {
    Proc,
    Overlay,
    Copy,
    Other,
}

/// Whether a path can go into overlayfs mount options unescaped.
fn overlay_safe(p: &Path) -> bool {
    !p.as_os_str()
        .as_bytes()
        .iter()
        .any(|b| matches!(b, b',' | b':' | b'\\' | b'=') || b.is_ascii_whitespace())
}

/// The view's operations, ready for the child.
fn view_ops(
    plan: &SandboxPlan,
    scratch: Option<&Path>,
    layers: &[(PathBuf, PathBuf)],
    opened: &std::collections::HashMap<PathBuf, OwnedFd>,
) -> Result<(Vec<ViewOp>, Vec<Target>), SandboxError> {
    let private: Vec<&Path> = layers.iter().map(|(p, _)| p.as_path()).collect();
    let surveyed = view::survey(plan, &private, opened)?;
    let home = private_home(plan);
    let files: Vec<(PathBuf, std::ffi::OsString)> = match scratch {
        Some(s) => plan
            .scratch_files
            .iter()
            .filter_map(|f| Some((s.join(&f.name), f.home.clone()?.into())))
            .collect(),
        None => Vec::new(),
    };
    let ops = view::plan_view(
        &surveyed,
        scratch,
        home.as_deref().map(|path| view::PrivateHome {
            path,
            files: &files,
        }),
    );
    let targets = ops
        .iter()
        .map(|o| {
            let kind = match o {
                Op::Proc => OpKind::Proc,
                Op::Overlay { .. } => OpKind::Overlay,
                Op::Copy(_) => OpKind::Copy,
                _ => OpKind::Other,
            };
            (o.target().to_path_buf(), kind)
        })
        .collect();
    let mut out = Vec::with_capacity(ops.len());
    for op in ops {
        out.push(match op {
            Op::Dir(p) => ViewOp::Dir(cpath("", &p)?),
            Op::File(p) => ViewOp::File(cpath("", &p)?),
            Op::Copy(p) => ViewOp::Copy {
                src: cpath(child::HOST, &p)?,
                dst: cpath("", &p)?,
            },
            Op::Symlink { at, text } => ViewOp::Symlink {
                at: cpath("", &at)?,
                text: cstring(&text, "a symlink")?,
            },
            Op::Bind {
                path,
                attrs,
                verify,
                identity,
                on_itself,
                fixup,
            } => ViewOp::Bind {
                fixup,
                src: cpath(child::HOST, &path)?,
                dst: cpath("", &path)?,
                attrs: MOUNT_ATTR_NOSUID
                    | if attrs.readonly { MOUNT_ATTR_RDONLY } else { 0 }
                    | if attrs.noexec { MOUNT_ATTR_NOEXEC } else { 0 }
                    | if attrs.nodev { MOUNT_ATTR_NODEV } else { 0 },
                identity: verify.or(identity),
                on_itself,
            },
            Op::Overlay {
                path,
                layer,
                identity,
            } => {
                let (_, dir) = layers.iter().find(|(p, _)| *p == path).ok_or_else(|| {
                    SandboxError::Launcher(io::Error::other("private layer without its directory"))
                })?;
                // The lower layer by descriptor, through the host's /proc
                // (the view's is not mounted yet).
                let slot = OVERLAY_SLOT + layer as RawFd;
                let mut data = format!("lowerdir={}/proc/self/fd/{slot}", child::HOST).into_bytes();
                data.extend_from_slice(format!(",upperdir={}", child::HOST).as_bytes());
                data.extend_from_slice(dir.join("upper").as_os_str().as_bytes());
                data.extend_from_slice(format!(",workdir={}", child::HOST).as_bytes());
                data.extend_from_slice(dir.join("work").as_os_str().as_bytes());
                data.extend_from_slice(b",userxattr");
                ViewOp::Overlay {
                    dst: cpath("", &path)?,
                    data: cstring(OsStr::from_bytes(&data), "overlay options")?,
                    lower: cpath(child::HOST, &path)?,
                    identity,
                    slot,
                }
            }
            Op::Proc => ViewOp::Proc {
                dst: c"/proc".to_owned(),
            },
            Op::Mask(p) => ViewOp::Mask {
                dst: cpath("", &p)?,
            },
            Op::CopyTo { from, to } => ViewOp::Copy {
                src: cpath(child::HOST, &from)?,
                dst: cpath("", &to)?,
            },
            Op::Tmpfs(p) => ViewOp::Tmpfs {
                dst: cpath("", &p)?,
                opts: cstring(
                    OsStr::new(&format!("mode=0700,size={PRIVATE_HOME_MIB}m")),
                    "tmpfs options",
                )?,
            },
        });
    }
    Ok((out, targets))
}

/// Size of the server's private home directory.
const PRIVATE_HOME_MIB: u64 = 256;

/// The plan's private home directory, canonical, when it is a directory.
fn private_home(plan: &SandboxPlan) -> Option<PathBuf> {
    let h = plan.private_home.as_ref()?;
    std::fs::canonicalize(h).ok().filter(|c| c.is_dir())
}

/// The descriptor numbers the child puts each overlay's lower layer at
/// (below the usual soft limit of 1024 open files).
const OVERLAY_SLOT: RawFd = 900;

/// The uid and gid maps of a new user namespace.
struct IdMaps {
    uid: String,
    gid: String,
    deny_setgroups: bool,
}

impl IdMaps {
    /// Root keeps every id (files keep their owners); another user maps
    /// only its own uid and gid.
    fn current() -> IdMaps {
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

    fn write(&self, pid: libc::pid_t) -> io::Result<()> {
        if self.deny_setgroups {
            std::fs::write(format!("/proc/{pid}/setgroups"), "deny")?;
        }
        std::fs::write(format!("/proc/{pid}/uid_map"), &self.uid)?;
        std::fs::write(format!("/proc/{pid}/gid_map"), &self.gid)?;
        Ok(())
    }
}

enum StartError {
    Child(child::Step, u32, io::Error),
    Os(&'static str, io::Error),
}

/// `clone3` the child, finish its set-up from the parent side, and wait
/// until it has exec'd the server or failed.
fn clone_and_start(
    setup: &ChildSetup,
    flags: u64,
    parent: Parent,
    maps: &IdMaps,
) -> Result<(libc::pid_t, OwnedFd), StartError> {
    let mut pidfd: libc::c_int = -1;
    // SAFETY: clone_args is plain data; zeroed is a valid value.
    let mut args: libc::clone_args = unsafe { std::mem::zeroed() };
    args.flags = flags | libc::CLONE_PIDFD as u64;
    args.pidfd = (&raw mut pidfd) as u64;
    args.exit_signal = libc::SIGCHLD as u64;
    // SAFETY: clone3 without CLONE_VM and without a stack is fork-like: the
    // child gets a copy of this address space and continues here with
    // return value 0, then runs only `setup.run()` (raw system calls, no
    // allocation, no lock), which never returns.
    let pid = unsafe {
        libc::syscall(
            libc::SYS_clone3,
            &mut args as *mut libc::clone_args,
            std::mem::size_of::<libc::clone_args>(),
        )
    };
    if pid == 0 {
        // SAFETY: we are the child of the clone above.
        unsafe { setup.run() }
    }
    if pid < 0 {
        return Err(StartError::Os("clone3", io::Error::last_os_error()));
    }
    let pid = pid as libc::pid_t;
    // SAFETY: the kernel returned a new pidfd we own.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    let Parent {
        child_ends,
        sync_w,
        err_r,
    } = parent;
    drop(child_ends);
    let abort = |what: &'static str, e: io::Error| {
        // SAFETY: signalling and reaping our own child.
        unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                pidfd.as_raw_fd(),
                libc::SIGKILL,
                std::ptr::null::<libc::siginfo_t>(),
                0,
            );
            libc::waitpid(pid, std::ptr::null_mut(), 0);
        }
        StartError::Os(what, e)
    };
    if let Some(w) = &sync_w {
        if flags & libc::CLONE_NEWUSER as u64 != 0
            && let Err(e) = maps.write(pid)
        {
            return Err(abort("write the user namespace's uid and gid maps", e));
        }
        if let Err(e) = rustix::io::write(w.as_fd(), &[1u8]) {
            return Err(abort("start the child", e.into()));
        }
    }
    let mut report = Vec::with_capacity(12);
    let mut f = std::fs::File::from(err_r);
    if let Err(e) = f.read_to_end(&mut report) {
        return Err(abort("read the child's report", e));
    }
    drop(sync_w);
    if report.is_empty() {
        return Ok((pid, pidfd));
    }
    // SAFETY: reaping our own child, which exits after reporting.
    unsafe {
        libc::waitpid(pid, std::ptr::null_mut(), 0);
    }
    match child::decode(&report) {
        Some((step, detail, e)) => Err(StartError::Child(step, detail, e)),
        None => Err(StartError::Os(
            "the child's report",
            io::Error::other("unreadable report"),
        )),
    }
}

type Job = Box<dyn FnOnce() + Send>;

static LAUNCHER: OnceLock<mpsc::Sender<Job>> = OnceLock::new();

/// Run `f` on the launcher thread, a thread that lives as long as the
/// process (so children it clones keep their parent-death signal armed
/// until rootfence exits).
///
/// The main thread lives as long as the process too: called there, `f`
/// runs directly (no thread to start, no hand-off).
fn on_launcher<T: Send + 'static>(
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, SandboxError> {
    // SAFETY: gettid and getpid cannot fail.
    let on_main_thread = unsafe { libc::gettid() == libc::getpid() };
    if on_main_thread {
        return Ok(f());
    }
    let sender = match LAUNCHER.get() {
        Some(s) => s,
        None => {
            let (tx, rx) = mpsc::channel::<Job>();
            std::thread::Builder::new()
                .name("rootfence-launcher".into())
                .spawn(move || {
                    for job in rx {
                        job();
                    }
                })
                .map_err(SandboxError::Launcher)?;
            // If another thread won the race, our sender is dropped and our
            // launcher thread ends.
            LAUNCHER.get_or_init(|| tx)
        }
    };
    let (tx, rx) = mpsc::sync_channel(1);
    sender
        .send(Box::new(move || {
            let _ = tx.send(f());
        }))
        .map_err(|_| SandboxError::Launcher(io::Error::other("the launcher thread is gone")))?;
    rx.recv()
        .map_err(|_| SandboxError::Launcher(io::Error::other("the launcher thread panicked")))
}
