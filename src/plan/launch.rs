//! From a command and roots to a plan: the one way every launch gets its
//! plan (the CLI's `run` and `explain`, the session's target, the tests
//! and benches).
//!
//! Unlike [`super::build`], these read the filesystem: the roots are
//! resolved (each opened once, its handle kept) and the command's runtime
//! is discovered.

use std::ffi::OsString;

use crate::policy::Policy;
use crate::roots::{RootInput, resolve_all};
use crate::runtime::{self, CommandSpec, HostEnv, RuntimeError};

use super::SandboxPlan;

/// The plan for launching `command` with `roots` (beyond the policy's own
/// `[roots]`) under `policy`.
///
/// # Security
///
/// Every root is resolved against the policy's rules before anything is
/// granted: a root the policy refuses is in the plan's `refused`, never in
/// its grants. The rest is `super::build`'s promise.
pub fn for_launch(
    policy: &Policy,
    roots: &[RootInput],
    command: &[OsString],
    env: &HostEnv,
) -> Result<SandboxPlan, RuntimeError> {
    let _memo = crate::canon::Memo::hold();
    let spec =
        runtime::discover_with(command, policy, env, &crate::roots::writable_paths(roots, env.home.as_deref()))?;
    let mut inputs = policy.static_roots.clone();
    inputs.extend(roots.iter().cloned());
    Ok(with_roots(policy, &inputs, spec, env))
}

/// The plan for an already discovered command and every root input
/// (the policy's own included: the caller chooses). What a session does
/// each time its roots change, without discovering the command again.
pub fn with_roots(
    policy: &Policy,
    inputs: &[RootInput],
    command: CommandSpec,
    env: &HostEnv,
) -> SandboxPlan {
    let _memo = crate::canon::Memo::hold();
    let (ok, refused) = resolve_all(inputs, &policy.root_rules(env.cwd.clone()));
    tracing::debug!(
        accepted = ok.len(),
        refused = refused.len(),
        policy = %policy.name(),
        "roots resolved"
    );
    super::build(policy, ok, refused, command, env)
}
