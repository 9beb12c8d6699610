//! The target: the one plan the session converges on.
//!
//! The target is computed from the root inputs (the policy's static roots,
//! the command line's, the host's latest `roots/list` answer, minus the
//! directories seen deleted, renamed or replaced), the policy and the
//! command. It is recomputed at once when the host's roots arrive, and
//! after `limits.rebuild_debounce_ms` for policy edits and changes on disk
//! (a burst of them makes one recomputation). A recomputation asks the
//! shell for a plan ([`Action::Plan`]); the target changes when the
//! newest plan asked for comes ([`Session::on_planned`]), an older one is
//! dropped. A policy that cannot be read needs no plan: it suspends the
//! target at once. Every lifecycle decision
//! compares generations with the target (see `lifecycle.rs`), never with
//! the plan enforced before.

use std::collections::HashSet;
use std::ffi::OsString;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Session;
use super::entitlements::Entitlements;
use super::io::{Action, PlanRequest, Planned};
use crate::plan::SandboxPlan;
use crate::policy::{Policy, PolicyError, PolicyFile};
use crate::roots::{Access, CanonicalRoot, RootInput, RootSource};
use crate::runtime::{CommandSpec, HostEnv};

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
    /// The target `planned` makes (under the policy it was planned with),
    /// suspended when the inputs are.
    fn new(version: u64, planned: Planned, inputs: &Inputs) -> Target {
        Target {
            version,
            plan: Arc::new(planned.plan),
            rights: Arc::new(planned.rights),
            policy: Arc::new(planned.policy.raw.clone()),
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
    pub policy: Arc<Policy>,
    cli_roots: Vec<RootInput>,
    no_host_roots: bool,
    command: Arc<[OsString]>,
    /// The command as last discovered.
    spec: CommandSpec,
    /// The policy changed since the command was discovered.
    rediscover: bool,
    env: Arc<HostEnv>,
    /// The host's roots, from its last readable `roots/list` answer.
    host_roots: Vec<RootInput>,
    /// Inputs whose directory was deleted, renamed or replaced after it
    /// was resolved.
    dropped: HashSet<String>,
    /// Why the latest policy edit cannot be applied, until one can.
    suspended: Option<String>,
}

impl Inputs {
    /// The inputs at the start of a session, `command` discovered as
    /// `spec`.
    pub fn new(
        policy: Policy,
        cli_roots: Vec<RootInput>,
        no_host_roots: bool,
        command: Vec<OsString>,
        env: HostEnv,
        spec: CommandSpec,
    ) -> Inputs {
        Inputs {
            policy: Arc::new(policy),
            cli_roots,
            no_host_roots,
            command: command.into(),
            spec,
            rediscover: false,
            env: Arc::new(env),
            host_roots: Vec::new(),
            dropped: HashSet::new(),
            suspended: None,
        }
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

    /// A new policy: the command's runtime is discovered again with the
    /// next plan ([`Inputs::discovered`]).
    pub fn set_policy(&mut self, policy: Policy) {
        self.policy = Arc::new(policy);
        self.rediscover = true;
    }

    /// The command discovered again under the policy in force. When it
    /// cannot be resolved, the policy cannot be applied: the inputs are
    /// suspended (fail closed) until another policy comes; when it can,
    /// the policy applies.
    fn discovered(&mut self, spec: Result<CommandSpec, crate::runtime::RuntimeError>) {
        self.rediscover = false;
        match spec {
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

    /// What the target is planned from now, as request `seq`, with
    /// `check`, the roots to look at again.
    fn request(&self, seq: u64, check: Vec<CanonicalRoot>) -> PlanRequest {
        let mut inputs: Vec<RootInput> = self.policy.static_roots.clone();
        inputs.extend(self.cli_roots.iter().cloned());
        if self.accepts_host_roots() {
            inputs.extend(self.host_roots.iter().cloned());
        }
        inputs.retain(|i| !self.dropped.contains(&i.raw));
        PlanRequest {
            seq,
            policy: self.policy.clone(),
            inputs,
            command: self.command.clone(),
            env: self.env.clone(),
            spec: self.spec.clone(),
            discover: self.rediscover,
            check,
        }
    }

    /// The inputs of roots found moved: left out from now on.
    fn drop_moved(&mut self, moved: Vec<String>) {
        for input in moved {
            if self.dropped.insert(input.clone()) {
                tracing::warn!(root = %input, "root directory was deleted, renamed or replaced: dropping it");
            }
        }
    }
}

/// The plan being made (see [`Session::recompute`]).
#[derive(Debug, Clone, Copy)]
pub struct Planning {
    /// The number of the newest request.
    pub seq: u64,
    /// Tell the host which of its roots were refused.
    report: bool,
    /// Host traffic waits for it (see [`Plan::Held`]).
    pub hold: bool,
    /// How many of the roots to look at again (the first of
    /// `Session::to_check`) it looks at.
    checked: usize,
}

/// What a plan asked for does besides making the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// Nothing more.
    Quiet,
    /// The host is told (as logging warnings) which of its roots were
    /// refused.
    Reported,
    /// As `Reported`, and host traffic is held until it comes: the host's
    /// roots were dropped, and what it sends goes to no server that may
    /// still hold one.
    Held,
}

/// The first target of a session (no host roots yet), from its first plan
/// (made before the session starts).
pub fn first(inputs: &Inputs, planned: Planned) -> Target {
    for r in &planned.plan.refused {
        tracing::warn!("{r}");
    }
    Target::new(1, planned, inputs)
}

impl Session {
    /// Plan the target again now (the plan comes back as
    /// [`super::Event::Planned`]; until then the target in force stays).
    /// A plan asked for meanwhile replaces this one, and does what both
    /// would have done.
    pub(super) fn recompute(&mut self, how: Plan) {
        self.recompute_at = None;
        let seq = self.plans_asked + 1;
        self.plans_asked = seq;
        let before = self.planning;
        self.planning = Some(Planning {
            seq,
            report: how != Plan::Quiet || before.is_some_and(|p| p.report),
            hold: how == Plan::Held || before.is_some_and(|p| p.hold),
            checked: self.to_check.len(),
        });
        let request = self.inputs.request(seq, self.to_check.clone());
        tracing::debug!(seq, "planning the target");
        self.out.push(Action::Plan(Box::new(request)));
    }

    /// A plan came: the target, when it answers the newest request.
    pub(super) fn on_planned(&mut self, planned: Planned, now: Instant) {
        let Some(planning) = self.planning.filter(|p| p.seq == planned.seq) else {
            tracing::debug!(seq = planned.seq, "a plan no longer asked for: dropped");
            return;
        };
        self.planning = None;
        self.to_check
            .drain(..planning.checked.min(self.to_check.len()));
        let mut planned = planned;
        if let Some(spec) = planned.discovered.take() {
            self.inputs.discovered(spec);
        }
        self.inputs.drop_moved(std::mem::take(&mut planned.moved));
        for r in &planned.plan.refused {
            tracing::warn!("{r}");
            if planning.report
                && r.from == RootSource::Host
                && let Some(note) = self.handshake.log_to_host("warning", &r.to_string())
            {
                self.send_host(note);
            }
        }
        let next = Target::new(self.target.version, planned, &self.inputs);
        // The host's roots are applied: what it sent meanwhile may go.
        self.host_roots_applied();
        self.retarget(next, now);
    }

    /// Make `next` the target (a new version when it differs), and settle.
    fn retarget(&mut self, mut next: Target, now: Instant) {
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

    /// The inputs were suspended: the target grants nothing from now, at
    /// once (no plan is needed to take rights away); a plan being made is
    /// no longer taken.
    fn suspend_target(&mut self, now: Instant) {
        self.planning = None;
        let mut next = self.target.clone();
        next.suspended = self.inputs.suspended.clone();
        self.retarget(next, now);
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
                if was_suspended {
                    self.recompute(Plan::Quiet);
                } else {
                    self.schedule_recompute(now);
                }
            }
            Err(e) => {
                // What the edit revokes is unknown: nothing is kept (fail
                // closed), at once.
                self.inputs
                    .suspend(format!("the policy file changed and cannot be read ({e})"));
                self.suspend_target(now);
            }
        }
    }

    /// Something changed near a root directory: after the debounce, the
    /// next plan looks at the target's roots of now again (the inputs of
    /// those whose directory is no longer the one resolved are dropped).
    pub(super) fn on_roots_maybe_changed(&mut self, now: Instant) {
        self.to_check.extend(self.target.plan.roots.iter().cloned());
        self.schedule_recompute(now);
    }
}
