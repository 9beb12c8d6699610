//! What goes into the session core and what comes out of it: events in,
//! actions out. The core does no I/O; the loop in `proxy/mod.rs` carries
//! out each [`Action`] and feeds back what happened as an [`Event`].

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::plan::SandboxPlan;
use crate::policy::Policy;
use crate::proxy::framing::Frame;
use crate::proxy::server::ServerEvent;

/// A server generation's number (1, 2, ...), never reused in a session.
pub type GenId = u64;

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
    PolicyChanged(Result<Box<Policy>, String>),
    /// Something changed near a root directory.
    RootsMaybeChanged,
    /// The outcome of [`Action::Launch`]: the process id, or why the
    /// launch failed.
    Launched(GenId, Result<u32, String>),
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
    /// Stop a generation; its reaper reports
    /// [`ServerEvent::Exited`](crate::proxy::server::ServerEvent::Exited)
    /// once the process (and, in its own PID namespace, every descendant)
    /// is gone.
    Stop(GenId, Stop),
    /// The serving generation's root paths: watch them for changes.
    WatchRoots(Vec<PathBuf>),
}

/// How a session ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ending {
    /// The host closed stdin.
    HostClosed,
    /// The server ended and the restart policy says stop.
    ServerEnded(String),
    /// The server could not be launched, or did not come up.
    LaunchFailed(String),
}
