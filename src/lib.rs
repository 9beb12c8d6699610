//! rootfence: makes MCP roots real.
//!
//! A launcher for MCP stdio servers that turns the protocol's advisory
//! roots into an enforced sandbox (Landlock, seccomp, namespaces where the
//! kernel allows them). This page is the library's surface for Rust hosts;
//! the `rootfence` binary is a thin layer over it.
//!
//! Three steps, each usable alone:
//!
//! 1. **A policy**: [`Policy::load`] reads a policy file,
//!    [`Policy::builtin`] is the default.
//! 2. **A plan**: [`plan_for_launch`] resolves the roots against the policy
//!    (refusing what it forbids), discovers what the command needs to
//!    start, and decides every path, port and variable the server gets.
//!    [`SandboxPlan`] is plain data: print it, test it, keep it.
//! 3. **A launch**: either [`spawn`] one sandboxed child with pipes you
//!    own, or [`run_proxy`] a whole MCP session (roots answered with the
//!    enforced ones, the sandbox rebuilt when roots change, sampling and
//!    elicitation policed) between your streams and a server started by a
//!    [`Launcher`] such as [`SandboxLauncher`].
//!
//! `examples/embed.rs` launches a fenced server and talks MCP to it.
//!
//! # Security
//!
//! The promises are the plan's: a server reads and writes its roots and
//! the runtime paths the plan lists, nothing else; a root the policy
//! refuses is never granted. What this kernel enforces of the plan is in
//! [`SandboxedChild::confinement`]; a launch that cannot enforce what the
//! policy requires fails instead of running the server unconfined.
//!
//! Nothing else is public: the modules below the surface are the crate's
//! own (public only to rootfence's own tests and benches, through a
//! `testing` feature that no build that ships turns on).

#![warn(missing_docs)]

pub use plan::SandboxPlan;
pub use plan::for_launch as plan_for_launch;
pub use policy::{Policy, PolicyError};
pub use proxy::run as run_proxy;
pub use proxy::{
    Change, Ending, LaunchError, LaunchFailure, Launcher, SandboxLauncher, ServerEnd,
    SessionConfig, SessionError,
};
pub use roots::{Access, RootInput};
pub use runtime::{HostEnv, RuntimeError};
pub use sandbox::{Confinement, SandboxError, SandboxedChild, Stdio, StdioConfig, spawn};

/// The `rootfence` command line, as the binary runs it.
pub fn cli_main() -> std::process::ExitCode {
    cli::main()
}

/// rootfence's internals: `pub(crate)`, and public (hidden from the
/// documentation) only with the `testing` feature, which rootfence's own
/// tests, benches and fuzz targets turn on.
macro_rules! internal {
    ($($m:ident),* $(,)?) => {$(
        #[cfg(feature = "testing")]
        #[doc(hidden)]
        pub mod $m;
        #[cfg(not(feature = "testing"))]
        #[allow(dead_code, unused_imports, unreachable_pub)]
        pub(crate) mod $m;
    )*};
}

internal!(
    audit, envvars, netproxy, plan, policy, proxy, roots, runtime, sandbox, store, watch,
);

mod canon;
mod cli;
mod fs;
mod hostconfig;
mod hostenv;
mod modes;
mod refusals;
mod statefile;
