//! The sandbox: what this kernel can enforce, and launching a server under
//! a [`SandboxPlan`](crate::plan::SandboxPlan).
//!
//! This module is the only place that talks to Landlock and seccomp.
//!
//! - [`probe`]: the kernel's Landlock ABI and what a plan would lose here;
//! - `landlock`: the ruleset a plan describes, built in the parent;
//! - [`seccomp`]: the system-call allow-list (what Landlock does not rule
//!   on: socket kinds, ioctls, namespaces, metadata without the view, calls
//!   a future kernel adds) and its supervisor for `listen()`;
//! - `scratch`: the private `TMPDIR`;
//! - [`view`]: the server's filesystem view (its mount namespace): the
//!   survey of the grants and the pure plan of mounts;
//! - `child`: the async-signal-safe code run between `clone` and `exec`
//!   (the namespaces' init, the view, the confinement);
//! - `spawn`: [`spawn`], the one way rootfence starts a server;
//! - [`netns`]: network by domain, the sandbox's side (the server's own
//!   network namespace, or the supervised `connect()` without one);
//! - `fdpass`: a descriptor from the child to rootfence.

mod child;
mod fdpass;
pub mod hints;
mod landlock;
pub mod netns;
mod probe;
mod scratch;
pub mod seccomp;
mod spawn;
pub mod view;

use std::path::PathBuf;

pub use child::Step;
pub use probe::{
    Capabilities, Closed, Coverage, LandlockStatus, Loss, NamespaceSupport, NetnsSupport, coverage,
    losses, network_rung, probe, probe_with_namespaces,
};
pub use scratch::Scratch;
pub use seccomp::supervisor::Refused;
pub use seccomp::{FilterPolicy, Listen};
pub use spawn::{
    CapabilityOutcome, Confinement, SandboxedChild, Stdio, StdioConfig, enable_subreaper, spawn,
    spawn_unconfined, sweep_orphans,
};

/// Why a sandboxed server could not be started.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    /// The kernel lacks something the plan needs (fail closed).
    #[error(
        "refusing to start: this kernel cannot enforce the sandbox: {}. Run `rootfence doctor` for details; use a kernel with Landlock enabled (lsm=...,landlock), relax the policy, or pass --unconfined-i-know-this-is-unsafe to run the server without any sandbox",
        missing.join("; ")
    )]
    CannotEnforce {
        /// What is missing, one entry per loss.
        missing: Vec<String>,
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
    Seccomp(String),
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
    /// The launcher thread could not be started or is gone.
    #[error("cannot start the launcher thread: {0}")]
    Launcher(std::io::Error),
}

/// Build the Landlock ruleset for `plan` on this kernel without applying
/// it, and return how many path rules it holds. What a launch pays before
/// `fork` for its ruleset; used by the plan-scale bench and diagnostics.
pub fn build_ruleset(plan: &crate::plan::SandboxPlan) -> Result<usize, SandboxError> {
    let prepared = landlock::prepare(plan, None, probe().abi(), false)?;
    Ok(prepared.path_rules)
}
