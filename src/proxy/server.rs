//! One server generation: a launched process, its stdin writer, its stdout
//! reader and its reaper, each a task that talks to the session through
//! channels.

use std::os::fd::OwnedFd;
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, AsyncWrite};

use super::flow;
use super::bigwrite::BigWriter;
use super::framing::{Drained, LineReader, LineSender, line_queue, write_all_lines};
pub use super::session::LaunchError;
use super::session::{ExitInfo, ServerEvent, Stop};
use crate::plan::SandboxPlan;

/// A launched server process: its pipes, its pid, and whatever must live
/// as long as it does.
pub struct ServerProcess {
    /// The server's stdin.
    pub stdin: Box<dyn AsyncWrite + Unpin + Send>,
    /// A second handle on the server's stdin when it is a pipe: big lines
    /// are written to it from another thread ([`super::bigwrite`]).
    /// `stdin` must then write straight to that pipe (no buffer of its
    /// own).
    pub stdin_pipe: Option<OwnedFd>,
    /// The server's stdout.
    pub stdout: Box<dyn AsyncRead + Unpin + Send>,
    /// Its process id. The launcher must not reap it before `reap` runs.
    pub pid: u32,
    /// Reaps the process once it has exited and releases what it held (its
    /// scratch directory). Called exactly once, after a pidfd reported the
    /// exit, so it does not block.
    pub reap: Box<dyn FnOnce() -> std::io::Result<ExitInfo> + Send>,
    /// After `reap`: why the server may have failed, from what it wrote on
    /// its stderr (a sandbox denial and the rule that would allow it).
    /// Called once, in a blocking thread.
    pub diagnose: Option<Box<dyn FnOnce() -> Option<String> + Send>>,
    /// Sandbox denials as the server's stderr shows them, while it runs
    /// (each the path refused and the rule that would allow it).
    pub denials: Option<tokio::sync::mpsc::UnboundedReceiver<String>>,
}

/// Launches a server for a plan. The production launcher applies the
/// Landlock sandbox; see `crate::sandbox`.
pub trait Launcher: Send + 'static {
    /// Start the server described by `plan`.
    fn launch(&mut self, plan: &SandboxPlan) -> Result<ServerProcess, LaunchError>;

    /// A server this launcher started answered `initialize`: it starts
    /// under the sandbox (the production launcher stops observing its
    /// starts).
    fn started(&mut self) {}
}

/// A child process watched through a pidfd: waiting and signalling can
/// never hit a recycled pid.
struct Pidfd(AsyncFd<OwnedFd>);

impl Pidfd {
    fn open(pid: u32) -> std::io::Result<Pidfd> {
        let pid = i32::try_from(pid)
            .ok()
            .and_then(rustix::process::Pid::from_raw)
            .ok_or_else(|| std::io::Error::other("invalid pid"))?;
        let fd = rustix::process::pidfd_open(pid, rustix::process::PidfdFlags::NONBLOCK)?;
        // SAFETY: `fd` is an open OwnedFd moved into the AsyncFd, which owns
        // it for its whole lifetime; its raw descriptor never changes.
        let fd = unsafe { AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE) }
            .map_err(std::io::Error::from)?;
        Ok(Pidfd(fd))
    }

    /// Wait until the process has exited (it stays a zombie until reaped).
    async fn exited(&self) -> std::io::Result<()> {
        // A pidfd becomes readable when its process exits.
        let _guard = self.0.readable().await?;
        Ok(())
    }

    fn signal(&self, sig: rustix::process::Signal) {
        let _ = rustix::process::pidfd_send_signal(self.0.get_ref(), sig);
    }
}

/// The session's handle on one generation.
pub struct Generation {
    /// Generation number (1, 2, ...).
    pub id: u64,
    /// Messages to the server's stdin.
    to_server: Option<LineSender>,
    /// Ask the reaper to shut the process down.
    stop: Option<tokio::sync::oneshot::Sender<Stop>>,
    /// The process, to kill it at once (also while it is being stopped
    /// gracefully).
    pidfd: std::sync::Arc<Pidfd>,
    /// Process id, for logs.
    pub pid: Option<u32>,
}

impl Generation {
    /// Start the tasks for a launched process.
    pub fn start(
        id: u64,
        proc: ServerProcess,
        max_line: usize,
        events: flow::Sender<ServerEvent>,
        drained: Drained,
    ) -> Result<Generation, LaunchError> {
        let pid = Some(proc.pid);
        let pidfd =
            std::sync::Arc::new(Pidfd::open(proc.pid).map_err(|source| LaunchError::Io {
                what: "cannot watch the server process through a pidfd",
                source,
            })?);
        let handle_pidfd = pidfd.clone();
        let stdin = proc.stdin;
        let big = proc.stdin_pipe.and_then(BigWriter::new);
        let stdout = proc.stdout;

        let (tx, mut rx) = line_queue(drained);
        tokio::spawn(async move {
            let mut stdin = stdin;
            if let Err(e) = write_all_lines(&mut stdin, &mut rx, big.as_ref()).await {
                tracing::debug!(generation = id, "server stdin closed: {e}");
            }
            // Dropping stdin (and its second handle, `big`) closes it: the
            // first step of a shutdown.
        });

        if let Some(mut denials) = proc.denials {
            let ev = events.clone();
            tokio::spawn(async move {
                while let Some(hint) = denials.recv().await {
                    if ev.send(ServerEvent::Denied(id, hint), 0).await.is_err() {
                        break;
                    }
                }
            });
        }
        let ev = events.clone();
        tokio::spawn(async move {
            let mut reader = LineReader::new(stdout, max_line);
            loop {
                // Read no further ahead of the session than the budget.
                ev.ready().await;
                match reader.next().await {
                    Ok(Some(frame)) => {
                        let held = frame.held();
                        if ev.send(ServerEvent::Frame(id, frame), held).await.is_err() {
                            break;
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        tracing::debug!(generation = id, "reading server stdout: {e}");
                        break;
                    }
                }
            }
            let _ = ev.send(ServerEvent::Eof(id), 0).await;
        });

        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<Stop>();
        tokio::spawn(async move {
            let exited = tokio::select! {
                s = pidfd.exited() => s.is_ok(),
                how = stop_rx => match how {
                    Ok(Stop::Kill) => {
                        pidfd.signal(rustix::process::Signal::KILL);
                        pidfd.exited().await.is_ok()
                    }
                    Ok(Stop::Graceful(grace)) => terminate(&pidfd, grace).await,
                    Ok(Stop::KillSoon(wait)) => {
                        if let Ok(Ok(())) = tokio::time::timeout(wait, pidfd.exited()).await {
                            true
                        } else {
                            pidfd.signal(rustix::process::Signal::KILL);
                            pidfd.exited().await.is_ok()
                        }
                    }
                    Err(_) => terminate(&pidfd, Duration::ZERO).await,
                },
            };
            // Reap only after the exit was seen: never a blocking wait on a
            // running process, never a signal to a reaped (reusable) pid.
            let status = if exited {
                tokio::task::spawn_blocking(proc.reap)
                    .await
                    .ok()
                    .and_then(Result::ok)
            } else {
                None
            };
            if let Some(diagnose) = proc.diagnose
                && let Ok(Some(hint)) = tokio::task::spawn_blocking(diagnose).await
            {
                let _ = events.send(ServerEvent::Denied(id, hint), 0).await;
            }
            let _ = events.send(ServerEvent::Exited(id, status), 0).await;
        });

        Ok(Generation {
            id,
            to_server: Some(tx),
            stop: Some(stop_tx),
            pidfd: handle_pidfd,
            pid,
        })
    }

    /// Whether too much waits to be written to the server.
    pub fn backed_up(&self) -> bool {
        self.to_server.as_ref().is_some_and(LineSender::backed_up)
    }

    /// Send one message to the server. Returns false if it is gone.
    pub fn send(&self, line: Vec<u8>) -> bool {
        self.to_server.as_ref().is_some_and(|tx| tx.send(line))
    }

    /// Stop the server: close its stdin and either SIGKILL it at once, or
    /// wait the grace period, SIGTERM, wait again, SIGKILL; or (its stdout
    /// closed) wait a moment for its end, then SIGKILL. The reaper
    /// reports [`ServerEvent::Exited`] once it has exited.
    pub fn stop(&mut self, how: Stop) {
        // A server that lost its stdout keeps its stdin while it is given a
        // moment to end: closing it would make most servers exit cleanly,
        // hiding why it failed.
        if !matches!(how, Stop::KillSoon(_)) {
            self.to_server = None;
        }
        if how == Stop::Kill {
            // At once, whatever the reaper is waiting for: a pidfd never
            // signals a recycled pid (once reaped, this fails with ESRCH).
            self.pidfd.signal(rustix::process::Signal::KILL);
        }
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(how);
        }
    }
}

/// Wait for the process to exit after its stdin was closed; escalate to
/// SIGTERM and SIGKILL after `grace` each. Returns whether it exited.
async fn terminate(p: &Pidfd, grace: Duration) -> bool {
    if let Ok(Ok(())) = tokio::time::timeout(grace, p.exited()).await {
        return true;
    }
    p.signal(rustix::process::Signal::TERM);
    if let Ok(Ok(())) = tokio::time::timeout(grace, p.exited()).await {
        return true;
    }
    p.signal(rustix::process::Signal::KILL);
    p.exited().await.is_ok()
}
