//! Planning the session's target: the shell's side of
//! [`Action::Plan`](super::session::Action::Plan). Everything here reads the
//! filesystem (each root opened and its canonical path read back, the
//! command's runtime discovered, the roots of the target looked at again,
//! the identity of each root's handle read), so the loop runs it off its
//! thread (`tokio::task::spawn_blocking`): a root whose directory does not
//! answer stalls its own plan, never the relay.

use std::ffi::OsString;
use std::sync::Arc;

use super::session::{Entitlements, PlanRequest, Planned, SessionConfig, SessionError};
use crate::policy::Policy;
use crate::roots::RootInput;
use crate::runtime::{self, CommandSpec, HostEnv};

/// The plan `request` asks for.
pub fn plan(request: &PlanRequest) -> Planned {
    let _memo = crate::canon::Memo::hold();
    // The command is discovered again for a new policy, and when a place
    // the server may write was added (a host's root) where discovery took
    // something from, or when it asked a launcher: what discovery read,
    // and the launchers it asked, must lie outside every one of them. (A
    // place that is no longer writable stays remembered as written: what
    // was left out for it stays out.)
    let writable = crate::roots::writable_paths(&request.inputs, request.env.home.as_deref());
    let now = runtime::writes_of(&request.policy, &writable);
    let added: Vec<&std::path::PathBuf> = now
        .iter()
        .filter(|p| !request.spec.server_writes.iter().any(|o| p.starts_with(o)))
        .collect();
    let again = request.discover || (!added.is_empty() && request.spec.reads_in(&added));
    let discovered = again.then(|| {
        runtime::discover_with(&request.command, &request.policy, &request.env, &writable)
    });
    let spec = match &discovered {
        Some(Ok(spec)) => spec.clone(),
        // Not asked, or the command cannot be resolved under the new
        // policy (the core then stops every server): the command as last
        // discovered.
        _ => request.spec.clone(),
    };
    let moved: Vec<String> = request
        .check
        .iter()
        .filter(|r| !r.handle.still_at(&r.path))
        .map(|r| r.input.clone())
        .collect();
    let mut inputs = request.inputs.clone();
    inputs.retain(|i| !moved.contains(&i.raw));
    let plan = crate::plan::with_roots(&request.policy, &inputs, spec, &request.env);
    let rights = Entitlements::of(&plan);
    Planned {
        seq: request.seq,
        policy: request.policy.clone(),
        plan,
        rights,
        discovered,
        moved,
    }
}

/// A session's first plan (the policy's and the command line's roots; the
/// host's come later, and the plan that has them discovers the command
/// again), and its command as discovered.
///
/// # Errors
///
/// When the command cannot be resolved under the policy.
pub fn first(
    policy: &Policy,
    cli_roots: &[RootInput],
    command: &[OsString],
    env: &HostEnv,
) -> Result<(CommandSpec, Planned), SessionError> {
    let _memo = crate::canon::Memo::hold();
    let spec = runtime::discover_with(
        command,
        policy,
        env,
        &crate::roots::writable_paths(cli_roots, env.home.as_deref()),
    )?;
    let mut inputs = policy.static_roots.clone();
    inputs.extend(cli_roots.iter().cloned());
    let plan = crate::plan::with_roots(policy, &inputs, spec.clone(), env);
    let rights = Entitlements::of(&plan);
    let planned = Planned {
        seq: 1,
        policy: Arc::new(policy.clone()),
        plan,
        rights,
        discovered: None,
        moved: Vec::new(),
    };
    Ok((spec, planned))
}

/// [`first`] for `config`, off the caller's thread.
///
/// # Errors
///
/// As [`first`], and when the planning thread could not finish.
pub fn first_off_loop(
    config: &SessionConfig,
) -> impl Future<Output = Result<(CommandSpec, Planned), SessionError>> + Send + 'static {
    let policy = config.policy.clone();
    let cli_roots = config.cli_roots.clone();
    let command = config.command.clone();
    let env = config.env.clone();
    let task = tokio::task::spawn_blocking(move || first(&policy, &cli_roots, &command, &env));
    async move { task.await.map_err(SessionError::Planning)? }
}
