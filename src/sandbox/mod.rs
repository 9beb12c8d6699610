//! The sandbox: what this machine can enforce, and launching a server
//! under a [`SandboxPlan`](crate::plan::SandboxPlan).
//!
//! This module is the only place that talks to Landlock and seccomp. One
//! concept per file:
//!
//! - `probe`: the kernel's Landlock ABI and seccomp; `nsprobe`: whether
//!   the server can have namespaces here (a test launch); `machine`: what
//!   this machine refused, remembered for the boot;
//! - [`coverage`](mod@coverage): the rung of isolation a plan gets here, what it would
//!   lose, and every class of escape with the layer that closes it;
//! - `landlock`: the ruleset a plan describes, built in the parent;
//! - [`seccomp`]: the system-call allow-list (what Landlock does not rule
//!   on: socket kinds, ioctls, namespaces, metadata without the view, calls
//!   a future kernel adds) and its supervisor for `listen()` and
//!   `connect()`;
//! - `resources`: the bounds of `[resources]` as they apply here;
//!   `cgroup`: the server's own cgroup, where one can be had; `inotify`:
//!   its user namespace's own inotify limits;
//! - `scratch`: the private `TMPDIR`;
//! - [`view`]: the server's filesystem view: the survey of the grants and
//!   the pure plan of mounts; `translate`: that plan as the child's
//!   operations; `mount`: the child carrying them out;
//! - `spawn`: [`spawn`](mod@spawn), the launch's steps in the parent; `stdio`: the
//!   server's standard streams; `launcher`: the thread every server is
//!   cloned from; `clone`: the one `clone3`/`clone` helper of the probe and
//!   the launch; `ids`: who rootfence runs as, the user namespace's maps;
//! - `child`: the child's steps between `clone` and `exec`; `init`: the
//!   PID-1 init of the server's namespace; `caps`: capabilities;
//!   `protocol`: how a failed step in the child reaches rootfence;
//! - `handle`: [`SandboxedChild`], the started server;
//! - `netns`: network by domain, the sandbox's side (the server's own
//!   network namespace holding the proxy's listener, or the supervised
//!   `connect()` without one); `fdpass`: a descriptor from the child to
//!   rootfence.

mod caps;
mod cgroup;
mod child;
mod clone;
pub mod coverage;
mod fdpass;
mod handle;
mod ids;
mod init;
mod inotify;
pub mod ladder;
mod landlock;
mod launcher;
mod machine;
mod mount;
mod netns;
mod nsprobe;
pub mod observed;
mod pidfd;
mod probe;
mod protocol;
mod resources;
mod scratch;
pub mod seccomp;
mod spawn;
mod stdio;
mod translate;
pub mod view;

use std::path::PathBuf;

pub use cgroup::{CgroupAt, CgroupSupport, Controllers};
pub use clone::{CloneCall, found as clone_call};
pub use coverage::{
    Closed, Coverage, DomainRung, Loss, Rung, coverage, domain_rung_here, losses, rung,
};
pub use fdpass::NotReceived;
pub use handle::{CapabilityOutcome, Confinement, SandboxedChild, enable_subreaper, sweep_orphans};
pub use netns::ProxyStart;
pub use nsprobe::{NamespaceSupport, NetnsSupport};
pub use probe::{Capabilities, LandlockStatus, probe, probe_remembered, probe_with_namespaces};
pub use protocol::Step;
pub use resources::{Applied, applied as resources_applied};
pub use scratch::Scratch;
pub use seccomp::supervisor::Refused;
pub use seccomp::{FilterPolicy, Listen};
pub use spawn::{spawn, spawn_unconfined};
pub use stdio::{Stdio, StdioConfig};

/// Why a sandboxed server could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The kernel lacks something the plan needs (fail closed).
    #[error(
        "refusing to start: this machine cannot enforce the sandbox the policy asks for: {}. Run `rootfence doctor` to see what this machine gives; --unconfined-i-know-this-is-unsafe runs the server without any sandbox",
        ladder::joined(.missing)
    )]
    CannotEnforce {
        /// What is missing and the way out, one entry per loss.
        missing: Vec<ladder::Missing>,
    },
    /// A required grant's path does not exist.
    #[error(
        "required path {path} does not exist ({why}); install what provides it, or remove it from the policy's [runtime] section"
    )]
    MissingPath {
        /// The path.
        path: PathBuf,
        /// Why it is granted.
        why: String,
    },
    /// A granted path could not be opened to build its rule.
    #[error("cannot open {path} ({why}) to build its Landlock rule: {source}")]
    OpenPath {
        /// The path.
        path: PathBuf,
        /// Why it is granted.
        why: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The Landlock ruleset could not be built as the plan needs.
    #[error(
        "Landlock: cannot {what}: {source}; run `rootfence doctor` to see what this kernel supports"
    )]
    Landlock {
        /// What was being done.
        what: String,
        /// The error.
        source: ::landlock::RulesetError,
    },
    /// The seccomp filter could not be compiled.
    #[error("cannot build the seccomp filter: {0}")]
    Seccomp(#[from] seccomp::FilterError),
    /// The scratch directory could not be created.
    #[error(
        "cannot create the scratch directory in {dir}: {source}; point TMPDIR at a writable directory, or set runtime.scratch = false in the policy"
    )]
    Scratch {
        /// Where.
        dir: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// The server could not be executed.
    #[error("cannot start {program}: {source}")]
    Spawn {
        /// The program.
        program: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// A step of the sandbox setup failed in the child; nothing was run.
    #[error(
        "cannot start {program}: the sandbox could not {step}{detail}: {source}; nothing was run (run `rootfence doctor`)"
    )]
    ChildSetup {
        /// The program.
        program: PathBuf,
        /// The step that failed.
        step: Step,
        /// What it was working on (` (/some/path)`), or empty.
        detail: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The server's own cgroup could not be made (`[resources]`), where
    /// the probe found that one can be.
    #[error(
        "cannot make the server's own cgroup ([resources] memory_mb and processes): {0}; nothing was run (run `rootfence doctor`)"
    )]
    Cgroup(std::io::Error),
    /// The launcher thread could not be started or is gone.
    #[error("cannot start the launcher thread: {0}")]
    Launcher(std::io::Error),
    /// The network proxy of `[network] allow_domains` could not start;
    /// the server was ended.
    #[error("cannot start the launcher thread: cannot start the network proxy: {0}")]
    NetworkProxy(netns::ProxyStart),
}

/// Build the Landlock ruleset for `plan` on this kernel without applying
/// it, and return how many path rules it holds. What a launch pays before
/// `fork` for its ruleset; used by the plan-scale bench and diagnostics.
pub fn build_ruleset(plan: &crate::plan::SandboxPlan) -> Result<usize, SandboxError> {
    let prepared = landlock::prepare(plan, None, None, probe().abi(), false)?;
    Ok(prepared.path_rules)
}
