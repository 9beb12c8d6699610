//! [`spawn`]: start a server under the sandbox a plan describes.

use std::io;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command, ExitStatus, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc;

use super::child::{self, ChildSetup, DropCaps, LandlockChild};
use super::scratch::Scratch;
use super::seccomp::{self, SocketPolicy};
use super::{SandboxError, landlock, losses, probe};
use crate::plan::SandboxPlan;

/// Where the server's standard streams go. Defaults to inheriting
/// rootfence's.
#[derive(Debug)]
pub struct StdioConfig {
    /// Standard input.
    pub stdin: Stdio,
    /// Standard output.
    pub stdout: Stdio,
    /// Standard error.
    pub stderr: Stdio,
}

impl Default for StdioConfig {
    fn default() -> Self {
        StdioConfig {
            stdin: Stdio::inherit(),
            stdout: Stdio::inherit(),
            stderr: Stdio::inherit(),
        }
    }
}

impl StdioConfig {
    /// stdin and stdout piped (the MCP stream), stderr inherited.
    pub fn piped() -> Self {
        StdioConfig {
            stdin: Stdio::piped(),
            stdout: Stdio::piped(),
            stderr: Stdio::inherit(),
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
        /// Path rules in the ruleset, `/proc/self` and the scratch
        /// directory included.
        path_rules: usize,
        /// What the seccomp filter refuses.
        sockets: SocketPolicy,
        /// What became of rootfence's capabilities.
        capabilities: CapabilityOutcome,
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
                sockets,
                capabilities,
            } => write!(
                f,
                "Landlock ABI {abi} fully enforced ({path_rules} path rules), seccomp socket filter loaded (udp {}, unix socket() {}), capabilities {}",
                if sockets.udp { "allowed" } else { "refused" },
                if sockets.deny_unix {
                    "refused"
                } else {
                    "allowed"
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

/// A running server.
///
/// The server's processes live and die with it: when it exits (seen by
/// [`wait`](Self::wait) or [`try_wait`](Self::try_wait)), whatever is left
/// of its process group is killed before it is reaped. Descendants that
/// leave the group (`setsid`, `setpgid`) survive it, still confined.
/// Dropping the handle kills the server and its group (`SIGKILL`) if it has
/// not been waited for, reaps it, and removes its scratch directory.
#[derive(Debug)]
pub struct SandboxedChild {
    child: Child,
    scratch: Option<Scratch>,
    confinement: Confinement,
    reaped: bool,
}

impl SandboxedChild {
    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What the server is confined by.
    pub fn confinement(&self) -> &Confinement {
        &self.confinement
    }

    /// The server's scratch directory (its `TMPDIR`), if the plan has one.
    pub fn scratch_dir(&self) -> Option<&Path> {
        self.scratch.as_ref().map(Scratch::path)
    }

    /// Take the server's stdin pipe (when [`StdioConfig`] piped it). Wrap
    /// it for tokio with `tokio::process::ChildStdin::from_std`.
    pub fn take_stdin(&mut self) -> Option<ChildStdin> {
        self.child.stdin.take()
    }

    /// Take the server's stdout pipe.
    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.child.stdout.take()
    }

    /// Take the server's stderr pipe.
    pub fn take_stderr(&mut self) -> Option<ChildStderr> {
        self.child.stderr.take()
    }

    /// Send `signal` to the server (not to its children).
    pub fn signal(&self, signal: i32) -> io::Result<()> {
        if self.reaped {
            return Ok(());
        }
        let pid = libc::pid_t::try_from(self.child.id())
            .map_err(|_| io::Error::from_raw_os_error(libc::ESRCH))?;
        // SAFETY: kill has no memory arguments; the pid is our unreaped
        // child, so it cannot have been reused.
        if unsafe { libc::kill(pid, signal) } < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Kill the server with `SIGKILL`.
    pub fn kill(&mut self) -> io::Result<()> {
        self.signal(libc::SIGKILL)
    }

    /// Wait for the server to exit (blocking), kill what is left of its
    /// process group, reap it, then remove its scratch directory. From async
    /// code call it in `spawn_blocking`.
    pub fn wait(&mut self) -> io::Result<ExitStatus> {
        if !self.reaped {
            self.exited(true)?;
            self.kill_group();
        }
        let status = self.child.wait()?;
        self.finish();
        Ok(status)
    }

    /// Whether the server has exited, without blocking; once it has, kills
    /// what is left of its process group, reaps it and removes the scratch
    /// directory.
    pub fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        if !self.reaped {
            if !self.exited(false)? {
                return Ok(None);
            }
            self.kill_group();
        }
        let status = self.child.try_wait()?;
        if status.is_some() {
            self.finish();
        }
        Ok(status)
    }

    /// Whether the server has exited (blocking until it has when `block`),
    /// without reaping it: while it is a zombie its pid, which is also its
    /// process group's id, cannot be reused.
    fn exited(&self, block: bool) -> io::Result<bool> {
        let pid = libc::id_t::from(self.child.id());
        loop {
            // SAFETY: waitid writes into the zeroed siginfo.
            let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
            let flags = libc::WEXITED | libc::WNOWAIT | if block { 0 } else { libc::WNOHANG };
            // SAFETY: valid pointer to a siginfo_t.
            let r = unsafe { libc::waitid(libc::P_PID, pid, &mut info, flags) };
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

    /// Kill every process left in the server's process group (its
    /// children that did not leave the group). The server is a group and
    /// session leader (`setsid`), so the group is the sandbox's own.
    fn kill_group(&self) {
        if let Ok(pid) = libc::pid_t::try_from(self.child.id()) {
            // SAFETY: kill has no memory arguments; the group id is the
            // pid of our unreaped child, which cannot have been reused.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
            }
        }
    }

    fn finish(&mut self) {
        self.reaped = true;
        if let Some(s) = self.scratch.take()
            && let Err(e) = s.remove()
        {
            tracing::warn!("cannot remove the scratch directory: {e}; remove it by hand");
        }
    }
}

impl Drop for SandboxedChild {
    fn drop(&mut self) {
        if !self.reaped {
            self.kill_group();
            let _ = self.child.kill();
            let _ = self.child.wait();
            self.finish();
        }
    }
}

/// Start the server `plan` describes, confined.
///
/// Everything is prepared in the calling process: the Landlock ruleset
/// (every path opened, roots from their handles), the seccomp program, the
/// scratch directory, argv and the environment (exactly the plan's, plus
/// `TMPDIR`). The fork happens on the main thread when called there, else on
/// a dedicated long-lived launcher thread, so the parent-death signal (which
/// Linux ties to the thread that forked) does not fire when a short-lived
/// caller thread (a tokio blocking thread) exits. Between `fork` and `exec` the child runs only raw system calls
/// (see the `child` module). Safe to call from any thread, including inside
/// a multi-threaded tokio runtime; it blocks until the server has been
/// exec'd (about a millisecond).
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
/// TCP by port; the plan's scopes) and the seccomp socket filter.
pub fn spawn(plan: &SandboxPlan, stdio: StdioConfig) -> Result<SandboxedChild, SandboxError> {
    launch(plan, stdio, true)
}

/// Start the server with no sandbox: the same environment, session,
/// descriptor hygiene and scratch directory as [`spawn`], but no Landlock,
/// no seccomp and no capability drop.
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

fn launch(
    plan: &SandboxPlan,
    stdio: StdioConfig,
    confine: bool,
) -> Result<SandboxedChild, SandboxError> {
    let scratch = if plan.scratch {
        Some(Scratch::create()?)
    } else {
        None
    };
    // SAFETY: getpid cannot fail.
    let parent_pid = unsafe { libc::getpid() };
    let mut setup = ChildSetup {
        parent_pid,
        landlock: None,
        seccomp: None,
        drop_caps: None,
    };
    let mut ruleset = None;
    let confinement = if confine {
        let caps = probe();
        let fatal: Vec<String> = losses(plan, &caps)
            .into_iter()
            .filter(|l| l.fatal)
            .map(|l| format!("{} needs {}", l.wants, l.missing))
            .collect();
        if !fatal.is_empty() {
            return Err(SandboxError::CannotEnforce { missing: fatal });
        }
        let prepared = landlock::prepare(plan, scratch.as_ref().map(Scratch::path), caps.abi())?;
        let sockets = SocketPolicy::for_plan(&plan.network, prepared.abi);
        setup.seccomp = Some(seccomp::compile(sockets)?);
        setup.landlock = Some(LandlockChild {
            ruleset: std::os::fd::AsRawFd::as_raw_fd(&prepared.fd),
            proc_self_access: prepared.proc_self_access,
        });
        let caps_held = child::cap_state();
        let capabilities = match (
            caps_held.must_drop,
            caps_held.root,
            caps_held.can_drop_bounding,
        ) {
            (false, _, _) => CapabilityOutcome::NoneHeld,
            (true, true, false) => CapabilityOutcome::BoundingSetKept,
            (true, _, _) => CapabilityOutcome::Dropped,
        };
        if caps_held.must_drop {
            if caps_held.root && !caps_held.can_drop_bounding {
                tracing::warn!(
                    "rootfence runs as root without CAP_SETPCAP: the capability bounding set cannot be emptied, so the server gets the bounding set's capabilities back at exec; run rootfence as an unprivileged user"
                );
            }
            setup.drop_caps = Some(DropCaps {
                // The kernel's CAP_LAST_CAP is lower (40 on Linux 6.18);
                // the child stops at the first unknown capability.
                last_cap: 63,
                bounding: caps_held.can_drop_bounding,
            });
        }
        let c = Confinement::Enforced {
            abi: prepared.abi,
            path_rules: prepared.path_rules + usize::from(prepared.proc_self_access != 0),
            sockets,
            capabilities,
        };
        ruleset = Some(prepared);
        c
    } else {
        Confinement::Unconfined
    };

    let program = plan.command.program.clone();
    let mut cmd = Command::new(&program);
    let mut argv = plan.command.argv.iter();
    if let Some(arg0) = argv.next() {
        cmd.arg0(arg0);
    }
    cmd.args(argv);
    cmd.env_clear();
    for (k, (v, _)) in &plan.env {
        cmd.env(k, v);
    }
    if let Some(s) = &scratch {
        cmd.env("TMPDIR", s.path());
    }
    cmd.stdin(stdio.stdin)
        .stdout(stdio.stdout)
        .stderr(stdio.stderr);
    // SAFETY: `apply` is async-signal-safe (raw system calls on memory
    // prepared above; see the child module), as `pre_exec` requires.
    unsafe {
        cmd.pre_exec(move || setup.apply());
    }
    let result = on_launcher(move || {
        let r = cmd.spawn();
        // The ruleset descriptor must outlive the fork; close it now.
        drop(ruleset);
        r
    })?;
    let child = result.map_err(|e| match child::decode(&e) {
        Some((step, source)) => SandboxError::ChildSetup {
            program: program.clone(),
            step,
            source,
        },
        None => SandboxError::Spawn {
            program: program.clone(),
            source: e,
        },
    })?;
    if scratch.is_some() {
        // Scratch directories of rootfences killed before they could
        // clean up: removed once per process, in the background.
        super::scratch::sweep_stale();
    }
    Ok(SandboxedChild {
        child,
        scratch,
        confinement,
        reaped: false,
    })
}

type Job = Box<dyn FnOnce() + Send>;

static LAUNCHER: OnceLock<mpsc::Sender<Job>> = OnceLock::new();

/// Run `f` on the launcher thread, a thread that lives as long as the
/// process (so children it forks keep their parent-death signal armed until
/// rootfence exits).
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
