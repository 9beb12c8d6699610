//! The production [`Launcher`]: each server generation started under the
//! sandbox ([`crate::sandbox::spawn`]), its stderr relayed to rootfence's.
//!
//! Until a server has once answered `initialize` under rootfence (its
//! first start, and every start after one that failed), its start is
//! observed: every call naming a path goes through rootfence's supervisor,
//! which records what the sandbox refused it. Each refusal is logged and
//! told to the host with the policy line that would allow it
//! ([`crate::refusals::hint`]), and a server that then fails names them in
//! the host's error. What the server prints is relayed, never read for
//! this: a server cannot put words in rootfence's mouth. Once a start has
//! gone through, later starts are not observed (observing costs a round
//! trip per path call). Its network is observed at every start: a TCP
//! connection to a port the policy does not grant, and a refused UDP
//! socket (a name lookup's first step), each a rare call.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use crate::plan::SandboxPlan;
use crate::refusals::{self, Context};
use crate::runtime::HostEnv;
use crate::sandbox::observed::Seen;
use crate::sandbox::{self, StdioConfig};

use super::server::{LaunchError, Launcher, ServerProcess};
use super::session::ExitInfo;

/// Size asked for the pipes to and from the server.
const PIPE_SIZE: usize = 1 << 20;

/// At most this many refusals of one generation are told to the host (all
/// are logged).
const MAX_TOLD: usize = 8;

/// At most this many refusals are named in the host's error when the
/// server fails.
const MAX_NAMED: usize = 3;

/// Launches each server generation under the sandbox its plan describes:
/// what `rootfence run` uses, and what a Rust host embedding the proxy
/// ([`super::run`]) gives it.
pub struct SandboxLauncher {
    /// The user's home directory, to name paths in hints (`~/x`).
    pub home: Option<std::path::PathBuf>,
    /// Whether the variables left out of the server's environment were
    /// logged (once per session).
    env_logged: bool,
    /// The record that this server once started under rootfence: in the
    /// server's state directory (rootfence's own, never the server's).
    started: Option<PathBuf>,
}

impl SandboxLauncher {
    /// A launcher naming paths under `home` as `~/...` in its hints.
    pub fn new(home: Option<std::path::PathBuf>) -> SandboxLauncher {
        SandboxLauncher {
            home,
            env_logged: false,
            started: None,
        }
    }
}

/// The file recording that a server started, in its store's directory.
const STARTED: &str = "started";

/// How long the reaper waits for the refusals of a dead server to be
/// judged.
const REFUSALS_TAIL: std::time::Duration = std::time::Duration::from_millis(500);

/// How long the reaper waits for the rest of a dead server's stderr (a
/// descendant outside its PID namespace may still hold the pipe).
const STDERR_TAIL: std::time::Duration = std::time::Duration::from_millis(200);

/// The mark each line of the server's stderr carries on rootfence's.
const SERVER_MARK: &str = "server: ";

/// The longest line of the server's stderr relayed whole; a longer one is
/// relayed in pieces of this size, each marked.
const MAX_STDERR_LINE: usize = 16 << 10;

/// Relay a server's stderr to rootfence's, line by line as it comes, each
/// line marked [`SERVER_MARK`] and its control characters escaped
/// ([`marked`]), so that nothing the server prints reads as rootfence's
/// own log; the returned function, called once the server has exited,
/// waits a moment for the rest.
fn relay_stderr(mut from: std::process::ChildStderr) -> Box<dyn FnOnce() + Send> {
    use std::io::{Read, Write};
    let (done_tx, done_rx) = std::sync::mpsc::sync_channel::<()>(1);
    let spawned = std::thread::Builder::new()
        .name("rootfence-server-stderr".into())
        .spawn(move || {
            let mut buf = vec![0u8; 8 << 10];
            let mut line: Vec<u8> = Vec::new();
            loop {
                let n = match from.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => n,
                };
                let mut out = Vec::new();
                for &b in &buf[..n] {
                    if b == b'\n' {
                        out.extend(marked(&line));
                        line.clear();
                    } else {
                        line.push(b);
                        if line.len() == MAX_STDERR_LINE {
                            out.extend(marked(&line));
                            line.clear();
                        }
                    }
                }
                let _ = std::io::stderr().write_all(&out);
            }
            if !line.is_empty() {
                let _ = std::io::stderr().write_all(&marked(&line));
            }
            let _ = done_tx.send(());
        });
    if let Err(e) = spawned {
        tracing::warn!("cannot relay the server's stderr: {e}");
    }
    Box::new(move || {
        let _ = done_rx.recv_timeout(STDERR_TAIL);
    })
}

/// One line of the server's stderr as rootfence relays it: marked, with
/// its control characters (escape sequences, carriage returns) and bytes
/// that are not UTF-8 escaped, and a newline.
fn marked(line: &[u8]) -> Vec<u8> {
    let mut out = String::with_capacity(SERVER_MARK.len() + line.len() + 1);
    out.push_str(SERVER_MARK);
    for chunk in line.utf8_chunks() {
        for c in chunk.valid().chars() {
            if c.is_control() && c != '\t' {
                match u8::try_from(c) {
                    Ok(b) if b.is_ascii() => out.push_str(&format!("\\x{b:02x}")),
                    _ => out.extend(c.escape_unicode()),
                }
            } else {
                out.push(c);
            }
        }
        for b in chunk.invalid() {
            out.push_str(&format!("\\x{b:02x}"));
        }
    }
    out.push('\n');
    out.into_bytes()
}

/// The hints of what the sandbox refused an observed server, as they
/// come: each logged, the first [`MAX_TOLD`] sent on the returned channel
/// (for the host), and the last [`MAX_NAMED`] kept in `last` (for the
/// host's error if the server fails).
fn watch_refusals(
    refusals: std::sync::mpsc::Receiver<Seen>,
    plan: &SandboxPlan,
    home: Option<PathBuf>,
    last: Arc<Mutex<Vec<String>>>,
    done: std::sync::mpsc::SyncSender<()>,
) -> tokio::sync::mpsc::UnboundedReceiver<String> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel::<String>();
    let plan = plan.clone();
    let uid = rustix::process::geteuid().as_raw();
    let spawned = std::thread::Builder::new()
        .name("rootfence-refusals".into())
        .spawn(move || {
            // rootfence's environment, read here, off the launch.
            let env = HostEnv {
                home,
                ..HostEnv::current()
            };
            let cx = Context {
                deny: &plan.deny,
                plan: &plan,
                env: &env,
                uid,
            };
            let mut told = 0;
            for seen in refusals {
                let hint = match seen {
                    Seen::Path(r) => match refusals::hint(&r, &cx) {
                        Some(h) => h,
                        None => {
                            tracing::debug!(
                                "the sandbox refused the server {} ({r})",
                                r.path.display()
                            );
                            continue;
                        }
                    },
                    Seen::Connect(addr) => refusals::connect_hint(addr),
                    Seen::Udp => refusals::UDP_HINT.to_string(),
                };
                tracing::warn!("{hint}");
                if let Ok(mut last) = last.lock() {
                    last.retain(|h| h != &hint);
                    if last.len() == MAX_NAMED {
                        last.remove(0);
                    }
                    last.push(hint.clone());
                }
                told += 1;
                if told <= MAX_TOLD {
                    let _ = tx.send(hint);
                } else if told == MAX_TOLD + 1 {
                    let _ = tx.send(format!(
                        "the sandbox refused the server more paths than the {MAX_TOLD} named: see rootfence's log, or run `rootfence learn` with the same command"
                    ));
                }
            }
            // Every refusal is judged: the server's end may be explained.
            let _ = done.send(());
        });
    if let Err(e) = spawned {
        tracing::warn!("cannot watch what the sandbox refuses the server: {e}");
    }
    rx
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
        // Observed until a start goes through; the record is taken away
        // now and made again when this one answers `initialize`.
        self.started = plan.home_store.as_ref().map(|s| s.dir.join(STARTED));
        let observe = self.started.as_ref().is_some_and(|f| !f.exists());
        if let Some(f) = &self.started {
            let _ = std::fs::remove_file(f);
        }
        // Its network always (a connection or a refused socket is a rare
        // call); its paths while it has not yet started.
        let mut observed = plan.clone();
        observed.observe_network = true;
        if observe && !plan.observe_paths {
            tracing::info!(
                "the server has not yet started under rootfence: its start is observed, and what the sandbox refuses it is said with the policy line that allows it"
            );
            observed.observe_paths = true;
        }
        let plan = &observed;
        // stderr too: the server never holds rootfence's own (which may be
        // a terminal); its lines are relayed to rootfence's stderr.
        let mut child = sandbox::spawn(plan, StdioConfig::all_piped())?;
        tracing::info!("server pid {}: {}", child.pid(), child.confinement());
        let stdin = child.take_stdin().ok_or(LaunchError::NotPiped("stdin"))?;
        let stdout = child.take_stdout().ok_or(LaunchError::NotPiped("stdout"))?;
        let tail = child.take_stderr().map(relay_stderr);
        let last = Arc::new(Mutex::new(Vec::new()));
        let (done_tx, done_rx) = std::sync::mpsc::sync_channel::<()>(1);
        let denials = child
            .watch_refusals()
            .map(|rx| watch_refusals(rx, plan, self.home.clone(), last.clone(), done_tx));
        let diagnose: Box<dyn FnOnce() -> Option<String> + Send> = Box::new(move || {
            if let Some(tail) = tail {
                tail();
            }
            // The refusals seen up to the end (the watch ends when the
            // server's last process has: its supervisor lets go).
            let _ = done_rx.recv_timeout(REFUSALS_TAIL);
            let last = last.lock().map(|l| l.join("; ")).unwrap_or_default();
            (!last.is_empty()).then_some(last)
        });
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
        let stdin_pipe = std::os::fd::AsFd::as_fd(&stdin).try_clone_to_owned().ok();
        let stdin = tokio::process::ChildStdin::from_std(stdin)
            .map_err(io("cannot register the server's stdin"))?;
        let stdout = tokio::process::ChildStdout::from_std(stdout)
            .map_err(io("cannot register the server's stdout"))?;
        Ok(ServerProcess {
            stdin: Box::new(stdin),
            stdin_pipe,
            stdout: Box::new(stdout),
            pid: child.pid(),
            // Reaps the server and removes its scratch directory.
            reap: Box::new(move || child.wait().map(ExitInfo::from_status)),
            diagnose: Some(diagnose),
            denials,
        })
    }

    fn started(&mut self) {
        if let Some(f) = &self.started
            && !f.exists()
            && let Err(e) = std::fs::write(f, b"")
        {
            tracing::debug!(
                "cannot record that the server started ({}): {e}",
                f.display()
            );
        }
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

#[cfg(test)]
mod tests {
    use super::marked;

    #[test]
    fn a_relayed_line_is_marked_and_its_control_bytes_escaped() {
        let line = |b: &[u8]| String::from_utf8(marked(b)).unwrap();
        assert_eq!(line(b"plain\ttext"), "server: plain\ttext\n");
        assert_eq!(line(b"a\rb\x1b[2Kc"), "server: a\\x0db\\x1b[2Kc\n");
        assert_eq!(line(b"bad \xff byte"), "server: bad \\xff byte\n");
        assert_eq!(line("é \u{9b}".as_bytes()), "server: é \\u{9b}\n");
    }
}
