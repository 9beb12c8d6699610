//! What goes into the session core and what comes out of it: events in,
//! actions out. The core does no I/O; the loop in `proxy/mod.rs` carries
//! out each [`Action`] and feeds back what happened as an [`Event`].

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::entitlements::Entitlements;
use crate::plan::SandboxPlan;
use crate::policy::{Policy, PolicyError};
use crate::proxy::message::Ident;
use crate::roots::{CanonicalRoot, RootInput};
use crate::runtime::{CommandSpec, HostEnv, RuntimeError};

/// A server generation's number (1, 2, ...), never reused in a session.
pub type GenId = u64;

/// One frame read from a stream.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame {
    /// A complete line, without its `\n` (and without a trailing `\r`).
    Line(Vec<u8>),
    /// A line longer than the limit: its total length and what
    /// identifies it.
    TooLong {
        /// Total length in bytes, without the newline.
        len: u64,
        /// Its id, method and kind, as far as they could be read.
        ident: Ident,
    },
}

impl Frame {
    /// The bytes this frame holds in memory.
    pub fn held(&self) -> usize {
        match self {
            Frame::Line(l) => l.len(),
            Frame::TooLong { .. } => 0,
        }
    }
}

/// How a server process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExitInfo {
    /// Exited with this code.
    Code(i32),
    /// Killed by this signal.
    Signal(i32),
}

impl ExitInfo {
    /// From a std exit status.
    pub fn from_status(st: std::process::ExitStatus) -> ExitInfo {
        use std::os::unix::process::ExitStatusExt;
        match (st.code(), st.signal()) {
            (Some(c), _) => ExitInfo::Code(c),
            (None, Some(s)) => ExitInfo::Signal(s),
            (None, None) => ExitInfo::Code(-1),
        }
    }

    /// Exit code 0.
    pub fn success(self) -> bool {
        self == ExitInfo::Code(0)
    }
}

impl std::fmt::Display for ExitInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExitInfo::Code(c) => write!(f, "exit code {c}"),
            ExitInfo::Signal(s) => write!(f, "signal {s}"),
        }
    }
}

/// What a generation's tasks (in `proxy/server.rs`) report to the session.
#[derive(Debug)]
pub enum ServerEvent {
    /// A frame from the server's stdout.
    Frame(u64, Frame),
    /// The server's stdout closed or failed.
    Eof(u64),
    /// A sandbox denial the server reported (its hint), sent just before
    /// [`ServerEvent::Exited`] when the process ended.
    Denied(u64, String),
    /// The server process ended.
    Exited(u64, Option<ExitInfo>),
}

/// Why a server could not be launched.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchError {
    /// The sandbox refused or failed to start it.
    #[error(transparent)]
    Sandbox(#[from] crate::sandbox::SandboxError),
    /// A system call on the way failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: &'static str,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// One of the server's standard streams is not a pipe rootfence holds.
    #[error("the server's {0} is not piped")]
    NotPiped(&'static str),
}

/// What an embedder, and rootfence's own watchers, may tell a running
/// session ([`crate::run_proxy`]): the session's other events are its own
/// (a host's frames, a server's, a launch's outcome), never handed in.
#[derive(Debug)]
pub enum Change {
    /// The policy changed: the new one, or why it cannot be read (then no
    /// server runs until one can: fail closed).
    Policy(Result<Box<Policy>, PolicyError>),
    /// Something changed near a root directory: the roots are looked at
    /// again.
    RootsMaybeChanged,
}

impl From<Change> for Event {
    fn from(c: Change) -> Event {
        match c {
            Change::Policy(p) => Event::PolicyChanged(p),
            Change::RootsMaybeChanged => Event::RootsMaybeChanged,
        }
    }
}

/// Events the session reacts to.
#[derive(Debug)]
pub enum Event {
    /// A frame from the host.
    Host(Frame),
    /// The host closed its side.
    HostEof,
    /// From a server generation.
    Server(ServerEvent),
    /// The policy file changed on disk: the new policy, or why it is
    /// rejected.
    PolicyChanged(Result<Box<Policy>, PolicyError>),
    /// Something changed near a root directory.
    RootsMaybeChanged,
    /// The outcome of [`Action::Launch`]: the process id, or why the
    /// launch failed.
    Launched(GenId, Result<u32, LaunchError>),
    /// The outcome of [`Action::Plan`]. One older than the newest asked
    /// is dropped.
    Planned(Box<Planned>),
}

/// Everything a target is planned from: what [`Action::Plan`] asks the
/// shell to resolve (every root opened, the command discovered again when
/// the policy changed, the roots of the target looked at again), off the
/// session's loop.
#[derive(Debug, Clone)]
pub struct PlanRequest {
    /// Its number: only the answer to the newest request is taken.
    pub seq: u64,
    /// The policy in force.
    pub policy: Arc<Policy>,
    /// Every root input, in the order given (the policy's, the command
    /// line's, then the host's), those dropped before left out.
    pub inputs: Vec<RootInput>,
    /// The server command.
    pub command: Arc<[OsString]>,
    /// rootfence's environment.
    pub env: Arc<HostEnv>,
    /// The command as last discovered.
    pub spec: CommandSpec,
    /// The policy changed since: discover the command again (and plan
    /// with `spec` when it cannot be).
    pub discover: bool,
    /// Roots to look at again: one whose directory is no longer the one
    /// resolved (deleted, renamed or replaced) has its input left out.
    pub check: Vec<CanonicalRoot>,
}

/// What the shell found for a [`PlanRequest`] ([`Event::Planned`]).
#[derive(Debug)]
pub struct Planned {
    /// The request's number.
    pub seq: u64,
    /// The policy it was planned with (the request's).
    pub policy: Arc<Policy>,
    /// The plan (its `refused` says which roots were refused, and why).
    pub plan: SandboxPlan,
    /// What it grants (the identity of each root's open handle read).
    pub rights: Entitlements,
    /// The command discovered again, when the request asked.
    pub discovered: Option<Result<CommandSpec, RuntimeError>>,
    /// The inputs of the roots checked whose directory was no longer the
    /// one resolved (left out of `plan`).
    pub moved: Vec<String>,
}

/// How to stop a generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stop {
    /// SIGKILL at once: its rights were revoked.
    Kill,
    /// Close its stdin, wait this long, SIGTERM, wait again, SIGKILL.
    Graceful(Duration),
    /// Its stdout closed: wait this long for it to end on its own (its exit
    /// status, and what it said on stderr, tell why), then SIGKILL.
    KillSoon(Duration),
}

/// What the session asks the loop to do, in order.
#[derive(Debug)]
pub enum Action {
    /// Write this line to the host.
    ToHost(Vec<u8>),
    /// Remember this handshake for the next session of the same command
    /// (see [`crate::proxy::init_cache`]).
    RememberInit(crate::proxy::init_cache::RememberedInit),
    /// Write this line to a generation's stdin.
    ToServer(GenId, Vec<u8>),
    /// Launch a generation under this plan, then report
    /// [`Event::Launched`].
    Launch(GenId, Arc<SandboxPlan>),
    /// Plan the target (the filesystem read off the loop), then report
    /// [`Event::Planned`].
    Plan(Box<PlanRequest>),
    /// Stop a generation; its reaper reports
    /// [`ServerEvent::Exited`]
    /// once the process (and, in its own PID namespace, every descendant)
    /// is gone.
    Stop(GenId, Stop),
    /// The serving generation's root paths: watch them for changes.
    WatchRoots(Vec<PathBuf>),
    /// A generation answered `initialize`: the server starts under its
    /// sandbox ([`crate::proxy::Launcher::started`]).
    ServerStarted(GenId),
}

/// How a session ended.
#[derive(Debug, Clone)]
pub enum Ending {
    /// The host closed stdin.
    HostClosed,
    /// The server ended and the restart policy says stop.
    ServerEnded(ServerEnd),
    /// The server could not be launched, or did not come up.
    LaunchFailed(LaunchFailure),
}

/// How a server went away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gone {
    /// It closed its stdout (and was stopped).
    ClosedStdout,
    /// It exited: how, when its status was read.
    Exited(Option<ExitInfo>),
}

impl std::fmt::Display for Gone {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Gone::ClosedStdout => f.write_str("closed its stdout"),
            Gone::Exited(Some(status)) => write!(f, "exited ({status})"),
            Gone::Exited(None) => f.write_str("exited (ended)"),
        }
    }
}

/// Why the session ended with its server: how the server went, and the
/// last thing the sandbox refused it (its hint, with the rule that would
/// allow it), if anything.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ServerEnd {
    /// It went, and every restart `limits.max_restarts` allows is used.
    #[error(
        "the server {gone} and limits.max_restarts = {max_restarts} is used up{}",
        denied(.denial)
    )]
    RestartsUsedUp {
        /// How it went.
        gone: Gone,
        /// The limit.
        max_restarts: u32,
        /// The last denial's hint.
        denial: Option<String>,
    },
    /// A relaunched server went during its handshake.
    #[error("the relaunched server {gone} during its handshake{}", denied(.denial))]
    InHandshake {
        /// How it went.
        gone: Gone,
        /// The last denial's hint.
        denial: Option<String>,
    },
    /// It went, and `limits.restart` does not restart it (or it never
    /// came up).
    #[error("the server {gone}{}", denied(.denial))]
    Ended {
        /// How it went.
        gone: Gone,
        /// The last denial's hint.
        denial: Option<String>,
    },
}

/// `; ` and the denial's hint, or nothing.
fn denied(denial: &Option<String>) -> String {
    denial
        .as_ref()
        .map_or_else(String::new, |hint| format!("; {hint}"))
}

/// Why a server could not be launched, or did not come up.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum LaunchFailure {
    /// The launcher could not start it.
    #[error(transparent)]
    Launch(Arc<LaunchError>),
    /// The first server did not answer `initialize` in time.
    #[error(
        "the server did not answer initialize within limits.initialize_timeout_ms = {timeout_ms} (raise it in the rootfence policy if the server is slow to start)"
    )]
    InitializeTimeout {
        /// The limit, in milliseconds.
        timeout_ms: u64,
    },
    /// A relaunched server did not answer the replayed `initialize` in
    /// time.
    #[error(
        "the relaunched server did not answer initialize within limits.initialize_timeout_ms = {timeout_ms}"
    )]
    ReplayTimeout {
        /// The limit, in milliseconds.
        timeout_ms: u64,
    },
    /// A relaunched server answered the replayed `initialize` with an
    /// error.
    #[error("the relaunched server refused initialize")]
    ReplayRefused,
}

/// Why rootfence does not relay a host line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum Unrelayable {
    /// Longer than `limits.max_message_bytes`.
    #[error(
        "message of {len} bytes exceeds the limit of {max} bytes (limits.max_message_bytes in the rootfence policy)"
    )]
    TooLong {
        /// Its length in bytes.
        len: u64,
        /// The limit.
        max: u64,
    },
    /// Not read one way by every reader.
    #[error("rootfence cannot read it unambiguously: {0}")]
    Unreadable(crate::proxy::canonical::Why),
    /// A batch outside protocol 2025-03-26.
    #[error(
        "Invalid Request: JSON-RPC batches are only allowed in protocol revision 2025-03-26 (this session: {revision})"
    )]
    Batch {
        /// The session's revision, or that none is negotiated yet.
        revision: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The words of a session's end, as the host's pending requests and
    /// rootfence's last line read them.
    #[test]
    fn endings_read_as_said() {
        let cases: Vec<(String, &str)> = vec![
            (
                ServerEnd::RestartsUsedUp {
                    gone: Gone::Exited(Some(ExitInfo::Signal(11))),
                    max_restarts: 3,
                    denial: Some("sandbox refused /etc/x".into()),
                }
                .to_string(),
                "the server exited (signal 11) and limits.max_restarts = 3 is used up; sandbox refused /etc/x",
            ),
            (
                ServerEnd::InHandshake {
                    gone: Gone::ClosedStdout,
                    denial: None,
                }
                .to_string(),
                "the relaunched server closed its stdout during its handshake",
            ),
            (
                ServerEnd::Ended {
                    gone: Gone::Exited(None),
                    denial: None,
                }
                .to_string(),
                "the server exited (ended)",
            ),
            (
                LaunchFailure::InitializeTimeout { timeout_ms: 1000 }.to_string(),
                "the server did not answer initialize within limits.initialize_timeout_ms = 1000 (raise it in the rootfence policy if the server is slow to start)",
            ),
            (
                LaunchFailure::ReplayTimeout { timeout_ms: 5 }.to_string(),
                "the relaunched server did not answer initialize within limits.initialize_timeout_ms = 5",
            ),
            (
                LaunchFailure::Launch(Arc::new(LaunchError::NotPiped("stdin"))).to_string(),
                "the server's stdin is not piped",
            ),
        ];
        for (said, want) in cases {
            assert_eq!(said, want);
        }
    }
}
