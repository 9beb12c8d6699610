//! The production [`Launcher`]: each server generation started under the
//! sandbox ([`crate::sandbox::spawn`]), its stderr relayed to rootfence's
//! and read for sandbox denials.

use crate::plan::SandboxPlan;
use crate::sandbox::{self, StdioConfig};

use super::server::{LaunchError, Launcher, ServerProcess};
use super::session::ExitInfo;

/// Size asked for the pipes to and from the server.
const PIPE_SIZE: usize = 1 << 20;

/// Launches each server generation under the sandbox its plan describes:
/// what `rootfence run` uses, and what a Rust host embedding the proxy
/// ([`super::run`]) gives it.
pub struct SandboxLauncher {
    /// The user's home directory, to name paths in denial hints (`~/x`).
    pub home: Option<std::path::PathBuf>,
    /// Whether the variables left out of the server's environment were
    /// logged (once per session).
    env_logged: bool,
}

impl SandboxLauncher {
    /// A launcher naming paths under `home` as `~/...` in its hints.
    pub fn new(home: Option<std::path::PathBuf>) -> SandboxLauncher {
        SandboxLauncher {
            home,
            env_logged: false,
        }
    }
}

/// How long the reaper waits for the rest of a dead server's stderr (a
/// descendant outside its PID namespace may still hold the pipe).
const STDERR_TAIL: std::time::Duration = std::time::Duration::from_millis(200);

/// What a server's stderr tells: the last denial's hint once it exited,
/// and each denial as it comes.
type Diagnosis = (
    Box<dyn FnOnce() -> Option<String> + Send>,
    tokio::sync::mpsc::UnboundedReceiver<String>,
);

/// Relay a server's stderr to rootfence's, reading it for sandbox denials
/// (each logged once, with the rule that would allow the path, and sent
/// on the returned channel). The returned function, called once the server
/// has exited, gives the last denial's hint.
fn relay_stderr(
    mut from: std::process::ChildStderr,
    plan: &SandboxPlan,
    home: Option<std::path::PathBuf>,
) -> Diagnosis {
    use std::io::{Read, Write};
    let mut watch = sandbox::hints::StderrWatch::new(plan.clone(), home);
    let (done_tx, done_rx) = std::sync::mpsc::sync_channel::<Option<String>>(1);
    let exists = |p: &std::path::Path| p.exists();
    let (hints_tx, hints_rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let spawned = std::thread::Builder::new()
        .name("rootfence-server-stderr".into())
        .spawn(move || {
            let mut buf = vec![0u8; 8 << 10];
            loop {
                let n = match from.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                let _ = std::io::stderr().write_all(&buf[..n]);
                for d in watch.feed(&buf[..n], &exists) {
                    tracing::warn!("sandbox denial: {}", d.hint);
                    let _ = hints_tx.send(d.hint);
                }
            }
            for d in watch.finish(&exists) {
                tracing::warn!("sandbox denial: {}", d.hint);
                let _ = hints_tx.send(d.hint);
            }
            let _ = done_tx.send(watch.last_hint().map(str::to_string));
        });
    if let Err(e) = spawned {
        tracing::warn!("cannot read the server's stderr for sandbox denials: {e}");
    }
    (
        Box::new(move || done_rx.recv_timeout(STDERR_TAIL).ok().flatten()),
        hints_rx,
    )
}

impl Launcher for SandboxLauncher {
    fn launch(&mut self, plan: &SandboxPlan) -> Result<ServerProcess, LaunchError> {
        for w in &plan.warnings {
            tracing::warn!("{w}");
        }
        if !self.env_logged {
            self.env_logged = true;
            log_dropped_env(&plan.env_dropped);
        }
        // stderr too: the server never holds rootfence's own (which may be
        // a terminal); its lines are relayed to rootfence's stderr.
        let mut child = sandbox::spawn(plan, StdioConfig::all_piped())?;
        tracing::info!("server pid {}: {}", child.pid(), child.confinement());
        let stdin = child.take_stdin().ok_or(LaunchError::NotPiped("stdin"))?;
        let stdout = child.take_stdout().ok_or(LaunchError::NotPiped("stdout"))?;
        let (diagnose, denials) = match child.take_stderr() {
            Some(stderr) => {
                let (d, rx) = relay_stderr(stderr, plan, self.home.clone());
                (Some(d), Some(rx))
            }
            None => (None, None),
        };
        // The network proxy's refusals reach the host as denials do.
        let denials = match (denials, child.take_network_notes()) {
            (Some(mut a), Some(mut b)) => {
                let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
                tokio::spawn(async move {
                    let (mut a_open, mut b_open) = (true, true);
                    while a_open || b_open {
                        let next = tokio::select! {
                            m = a.recv(), if a_open => m.or_else(|| { a_open = false; None }),
                            m = b.recv(), if b_open => m.or_else(|| { b_open = false; None }),
                        };
                        if let Some(m) = next
                            && tx.send(m).is_err()
                        {
                            return;
                        }
                    }
                });
                Some(rx)
            }
            (a, b) => a.or(b),
        };
        // Larger pipes: a big message crosses in fewer wake-ups. Best
        // effort; the default size works too.
        let _ = rustix::pipe::fcntl_setpipe_size(&stdin, PIPE_SIZE);
        let _ = rustix::pipe::fcntl_setpipe_size(&stdout, PIPE_SIZE);
        let io = |what| move |source| LaunchError::Io { what, source };
        let stdin = tokio::process::ChildStdin::from_std(stdin)
            .map_err(io("cannot register the server's stdin"))?;
        let stdout = tokio::process::ChildStdout::from_std(stdout)
            .map_err(io("cannot register the server's stdout"))?;
        Ok(ServerProcess {
            stdin: Box::new(stdin),
            stdout: Box::new(stdout),
            pid: child.pid(),
            // Reaps the server and removes its scratch directory.
            reap: Box::new(move || child.wait().map(ExitInfo::from_status)),
            diagnose,
            denials,
        })
    }
}

/// Log, once, the names of rootfence's variables that do not reach the
/// server: all of them at info, and at warn those that look like a host
/// config's settings for the server (not a shell's or a session's, see
/// [`crate::envvars::SESSION`]). Names only: values may be secrets.
fn log_dropped_env(dropped: &[String]) {
    if dropped.is_empty() {
        return;
    }
    tracing::info!(
        "{} variables of rootfence's environment do not reach the server: {} (pass one with --env NAME, or [env] pass in the policy)",
        dropped.len(),
        dropped.join(" ")
    );
    let suspect: Vec<&str> = dropped
        .iter()
        .map(String::as_str)
        .filter(|n| !crate::envvars::is_session_variable(n))
        .collect();
    if !suspect.is_empty() {
        tracing::warn!(
            "not passed to the server: {}; if the host's config sets {} for the server, add --env NAME for each to rootfence's arguments (`rootfence wrap` does), or list {} in the policy's [env] pass",
            suspect.join(" "),
            if suspect.len() == 1 { "it" } else { "them" },
            if suspect.len() == 1 { "it" } else { "them" },
        );
    }
}
