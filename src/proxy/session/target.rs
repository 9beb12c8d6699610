//! The target: the one plan the session converges on.
//!
//! The target is computed from the root inputs (the policy's static roots,
//! the command line's, the host's latest `roots/list` answer, minus the
//! directories seen deleted, renamed or replaced), the policy and the
//! command. It is recomputed at once when the host's roots arrive, and
//! after `limits.rebuild_debounce_ms` for policy edits and changes on disk
//! (a burst of them makes one recomputation). Every lifecycle decision
//! compares generations with the target (see `lifecycle.rs`), never with
//! the plan enforced before.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Session;
use super::entitlements::Entitlements;
use crate::plan::{self, SandboxPlan};
use crate::policy::{Policy, PolicyError, PolicyFile};
use crate::roots::{Access, CanonicalRoot, RootInput, RootSource};
use crate::runtime::{self, CommandSpec, HostEnv};

/// What the server should be allowed now.
#[derive(Debug, Clone)]
pub struct Target {
    /// Bumped whenever the roots or the rights change.
    pub version: u64,
    /// The plan a generation launched now gets.
    pub plan: Arc<SandboxPlan>,
    /// What that plan grants.
    pub rights: Arc<Entitlements>,
    /// The policy it was computed with: what a server is offered in its
    /// `initialize` follows it (see `Handshake::offer`).
    pub policy: Arc<PolicyFile>,
    /// The policy in force cannot be applied (an edit that cannot be read,
    /// or under which the command cannot be resolved): why. No server may
    /// run until a policy that can be applied comes.
    pub suspended: Option<String>,
}

impl Target {
    fn new(version: u64, plan: SandboxPlan, inputs: &Inputs) -> Target {
        let rights = Arc::new(Entitlements::of(&plan));
        Target {
            version,
            plan: Arc::new(plan),
            rights,
            policy: Arc::new(inputs.policy.raw.clone()),
            suspended: inputs.suspended.clone(),
        }
    }

    /// The roots, as the server is told them.
    pub fn roots(&self) -> &[CanonicalRoot] {
        &self.plan.roots
    }
}

/// Everything the target is computed from.
pub struct Inputs {
    /// The policy in force.
    pub policy: Policy,
    cli_roots: Vec<RootInput>,
    no_host_roots: bool,
    command: Vec<std::ffi::OsString>,
    spec: CommandSpec,
    env: HostEnv,
    /// The host's roots, from its last readable `roots/list` answer.
    host_roots: Vec<RootInput>,
    /// Inputs whose directory was deleted, renamed or replaced after it
    /// was resolved.
    dropped: HashSet<String>,
    /// Why the latest policy edit cannot be applied, until one can.
    suspended: Option<String>,
}

impl Inputs {
    /// The inputs at the start of a session.
    pub fn new(
        policy: Policy,
        cli_roots: Vec<RootInput>,
        no_host_roots: bool,
        command: Vec<std::ffi::OsString>,
        env: HostEnv,
    ) -> Result<Inputs, runtime::RuntimeError> {
        let spec = runtime::discover(&command, &policy, &env)?;
        Ok(Inputs {
            policy,
            cli_roots,
            no_host_roots,
            command,
            spec,
            env,
            host_roots: Vec::new(),
            dropped: HashSet::new(),
            suspended: None,
        })
    }

    /// Whether the host's roots count (not `--no-host-roots`, and the
    /// policy's `roots.sources` admits them).
    pub fn accepts_host_roots(&self) -> bool {
        !self.no_host_roots
            && (self.policy.sources.is_empty() || self.policy.sources.contains(&RootSource::Host))
    }

    /// The command's name, as a server would name itself.
    pub fn command_name(&self) -> String {
        self.command
            .first()
            .map(|c| {
                std::path::Path::new(c)
                    .file_name()
                    .unwrap_or(c.as_os_str())
                    .to_string_lossy()
                    .into_owned()
            })
            .unwrap_or_default()
    }

    /// The access host roots get.
    pub fn host_access(&self) -> Access {
        self.policy.raw.roots.host_access.into()
    }

    /// A new policy: the command's runtime is discovered again. When it
    /// cannot be resolved under the new policy, the policy cannot be
    /// applied: the inputs are suspended (fail closed).
    pub fn set_policy(&mut self, policy: Policy) {
        self.policy = policy;
        match runtime::discover(&self.command, &self.policy, &self.env) {
            Ok(spec) => {
                self.spec = spec;
                self.suspended = None;
            }
            Err(e) => self.suspend(format!(
                "after the policy change the command cannot be resolved ({e})"
            )),
        }
    }

    /// A policy edit cannot be applied (`why`): no server may run until
    /// one can.
    pub fn suspend(&mut self, why: String) {
        if self.suspended.is_some() {
            return;
        }
        tracing::error!("{why}: stopping the server until the policy can be applied");
        self.suspended = Some(format!(
            "rootfence stopped the server: {why}; fix the policy file and the server starts again"
        ));
    }

    /// The host's new roots. A fresh list re-affirms a root dropped before.
    pub fn set_host_roots(&mut self, roots: Vec<RootInput>) {
        self.dropped.retain(|d| !roots.iter().any(|i| &i.raw == d));
        self.host_roots = roots;
    }

    /// `roots` in the order their inputs were given (the policy's, the
    /// command line's, then the host's, each in its own order), as a
    /// server is told them: a server resolving a relative path against its
    /// first root (`rootfence fs`, the reference server) then resolves it
    /// as it would with the same roots given directly. The plan keeps its
    /// roots sorted by path (the view is built parents first).
    pub fn given_order<'a>(&self, roots: &'a [CanonicalRoot]) -> Vec<&'a CanonicalRoot> {
        // The first position of each input (thousands of host roots: a
        // look-up each, not a search).
        let mut given: std::collections::HashMap<(RootSource, &str), usize> =
            std::collections::HashMap::new();
        for (i, input) in self
            .policy
            .static_roots
            .iter()
            .chain(&self.cli_roots)
            .chain(&self.host_roots)
            .enumerate()
        {
            given.entry((input.source, input.raw.as_str())).or_insert(i);
        }
        let mut out: Vec<&CanonicalRoot> = roots.iter().collect();
        out.sort_by_key(|r| {
            given
                .get(&(r.source, r.input.as_str()))
                .copied()
                .unwrap_or(usize::MAX)
        });
        out
    }

    /// Resolve every input and build the plan (its `refused` says which
    /// roots were refused, and why).
    pub fn compute(&self) -> SandboxPlan {
        let mut inputs: Vec<RootInput> = self.policy.static_roots.clone();
        inputs.extend(self.cli_roots.iter().cloned());
        if self.accepts_host_roots() {
            inputs.extend(self.host_roots.iter().cloned());
        }
        inputs.retain(|i| !self.dropped.contains(&i.raw));
        plan::with_roots(&self.policy, &inputs, self.spec.clone(), &self.env)
    }

    /// Drop the inputs of `roots` whose directory is no longer the one
    /// resolved (deleted, renamed or replaced). Returns whether any was.
    pub fn drop_moved(&mut self, roots: &[CanonicalRoot]) -> bool {
        let mut changed = false;
        for r in roots {
            if !r.handle.still_at(&r.path) && self.dropped.insert(r.input.clone()) {
                tracing::warn!(root = %r.uri, "root directory was deleted, renamed or replaced: dropping it");
                changed = true;
            }
        }
        changed
    }
}

/// The first target of a session (no host roots yet).
pub fn first(inputs: &Inputs) -> Target {
    let plan = inputs.compute();
    for r in &plan.refused {
        tracing::warn!("{r}");
    }
    Target::new(1, plan, inputs)
}

impl Session {
    /// Recompute the target now. With `report`, the host is told (as
    /// logging warnings) which of its roots were refused.
    pub(super) fn recompute(&mut self, report: bool, now: Instant) {
        self.recompute_at = None;
        let plan = self.inputs.compute();
        for r in &plan.refused {
            tracing::warn!("{r}");
            if report
                && r.from == RootSource::Host
                && let Some(note) = self.handshake.log_to_host("warning", &r.to_string())
            {
                self.send_host(note);
            }
        }
        let mut next = Target::new(self.target.version, plan, &self.inputs);
        let same_roots = next.roots().len() == self.target.roots().len()
            && next
                .roots()
                .iter()
                .zip(self.target.roots())
                .all(|(a, b)| a.path == b.path && a.uri == b.uri && a.name == b.name);
        let same = same_roots
            && next.suspended == self.target.suspended
            && next.rights.same(&self.target.rights)
            && self.handshake.offer(&next.policy) == self.handshake.offer(&self.target.policy);
        if !same {
            next.version += 1;
            tracing::info!(
                roots = next.roots().len(),
                version = next.version,
                "target changed"
            );
        }
        self.target = next;
        self.settle(now);
    }

    /// Recompute the target after the debounce (policy edits, changes on
    /// disk).
    pub(super) fn schedule_recompute(&mut self, now: Instant) {
        let debounce = Duration::from_millis(self.inputs.policy.raw.limits.rebuild_debounce_ms);
        if self.recompute_at.is_none() {
            self.recompute_at = Some(now + debounce);
        }
    }

    /// A new policy from disk.
    pub(super) fn on_policy(&mut self, policy: Result<Box<Policy>, PolicyError>, now: Instant) {
        match policy {
            Ok(p) => {
                tracing::info!(policy = %p.name(), "policy changed on disk");
                let was_suspended = self.target.suspended.is_some();
                self.inputs.set_policy(*p);
                self.guard.policy_changed(&self.inputs.policy);
                if self.inputs.suspended.is_some() || was_suspended {
                    self.recompute(false, now);
                } else {
                    self.schedule_recompute(now);
                }
            }
            Err(e) => {
                // What the edit revokes is unknown: nothing is kept (fail
                // closed), at once.
                self.inputs
                    .suspend(format!("the policy file changed and cannot be read ({e})"));
                self.recompute(false, now);
            }
        }
    }

    /// Something changed near a root directory: drop the target's roots
    /// that moved, and recompute.
    pub(super) fn on_roots_maybe_changed(&mut self, now: Instant) {
        let roots = self.target.plan.roots.clone();
        if self.inputs.drop_moved(&roots) {
            self.schedule_recompute(now);
        }
    }
}
