//! The session core: everything rootfence decides between the host and the
//! server generations, with no I/O. It takes [`Event`]s (and the time) and
//! answers with [`Action`]s, which the loop in `proxy/mod.rs` carries out;
//! a test drives it with no process and no sleep. Planning the target
//! reads the filesystem, so it is an action too ([`Action::Plan`], made
//! by `proxy/planner.rs` off the loop, back as [`Event::Planned`]).
//!
//! One exception is left: the guard opens the policy's `[audit] file` and
//! appends its records itself.
//!
//! Which file decides what:
//!
//! - `target.rs`: the target, the one plan the session converges on (host
//!   roots, policy, command line), when it is planned again, and which
//!   plan is taken;
//! - `entitlements.rs`: the one comparison of plans (what a plan grants outside
//!   another), used for revocation, promotion and "no relaunch needed";
//! - `lifecycle.rs`: generations and the fleet (launch, promote, drain,
//!   revoke, restart, stop), in the order of `settle`;
//! - `host.rs`: the host's lines (requests held or sent, `initialize`,
//!   `initialized`, `roots/list_changed`, cancellations, progress, answers
//!   to server requests);
//! - `host_roots.rs`: asking the host for its roots, holding host traffic
//!   meanwhile;
//! - `server.rs`: the generations' lines, by phase (answers, requests to
//!   the host through the guard, notifications, `roots/list`);
//! - `ledger.rs`: every id in flight, in every direction, and id equality;
//! - `stateless.rs`: the guard's look at each host request and at the
//!   server's answer to it: protocol versions, `_meta` capabilities,
//!   `input_required` results judged, rootfence's own retries, the host's
//!   retries and roots in the stateless era (2026-07-28);
//! - `batch.rs`: batches;
//! - `handshake.rs`: the recorded handshake and its replay;
//! - `io.rs`: events in, actions out.
//!
//! Invariants kept:
//! - every request the host sends gets exactly one response (from the
//!   server, or an error from rootfence), across rebuilds, revocations,
//!   crashes and timeouts; a request the host cancels gets none;
//! - no generation with a right outside the target is promoted, and none
//!   keeps running once the target no longer grants its rights;
//! - at rest, the serving generation's rights are the target's;
//! - ids rootfence sends to the host come from one counter, and a
//!   generation's answer is taken only for a request sent to it.

mod batch;
mod entitlements;
mod handshake;
mod host;
mod host_roots;
mod io;
mod ledger;
mod lifecycle;
mod notes;
mod server;
mod stateless;
mod target;

#[cfg(test)]
mod tests;

use std::time::Instant;

use serde_json::Value;

pub use entitlements::Entitlements;
pub use io::{
    Action, Change, Ending, Event, ExitInfo, Frame, GenId, Gone, LaunchError, LaunchFailure,
    PlanRequest, Planned, ServerEnd, ServerEvent, Stop,
};

use crate::policy::Policy;
use crate::proxy::guard::Guard;
use crate::proxy::init_cache::RememberedInit;
use crate::roots::{CanonicalRoot, RootInput};
use crate::runtime::{CommandSpec, HostEnv};

/// Why a session cannot start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// The server command cannot be resolved under the policy.
    #[error(transparent)]
    Command(#[from] crate::runtime::RuntimeError),
    /// The thread making the first plan did not finish (it panicked, or
    /// the runtime is shutting down).
    #[error("the session's first plan could not be made: {0}")]
    Planning(#[source] tokio::task::JoinError),
}

/// Called with the enforced root paths whenever they change.
pub type RootsObserver = Box<dyn FnMut(&[std::path::PathBuf]) + Send>;

/// Everything a session needs to start.
pub struct SessionConfig {
    /// The policy in force at start.
    pub policy: Policy,
    /// Roots from the command line.
    pub cli_roots: Vec<RootInput>,
    /// `--no-host-roots`: ignore the host's roots.
    pub no_host_roots: bool,
    /// The server command.
    pub command: Vec<std::ffi::OsString>,
    /// rootfence's environment.
    pub env: HostEnv,
    /// Told the enforced root paths whenever they change (to watch them);
    /// called on `Action::WatchRoots`, off the loop's thread.
    pub roots_observer: Option<RootsObserver>,
    /// What a previous run of this command answered to `initialize`
    /// (`crate::proxy::init_cache`): with it, a session whose roots come
    /// from the host starts one server instead of two.
    pub remembered_init: Option<RememberedInit>,
    /// Called on `Action::RememberInit`, off the loop's thread (before
    /// the session ends, within `limits.shutdown_grace_ms` at its end).
    pub remember: Option<RememberFn>,
}

impl SessionConfig {
    /// A session launching `command` under `policy` with `roots` (beyond
    /// the policy's own and the host's): no watcher, nothing remembered.
    pub fn new(
        policy: Policy,
        roots: Vec<RootInput>,
        command: Vec<std::ffi::OsString>,
        env: HostEnv,
    ) -> SessionConfig {
        SessionConfig {
            policy,
            cli_roots: roots,
            no_host_roots: false,
            command,
            env,
            roots_observer: None,
            remembered_init: None,
            remember: None,
        }
    }
}

/// Stores a handshake for the next session ([`Action::RememberInit`]).
pub type RememberFn = Box<dyn FnMut(&RememberedInit) + Send>;

/// The session core.
pub struct Session {
    inputs: target::Inputs,
    target: target::Target,
    /// A debounced recomputation of the target.
    recompute_at: Option<Instant>,
    /// The plan asked for and not yet come.
    planning: Option<target::Planning>,
    /// How many plans were asked for.
    plans_asked: u64,
    /// Something changed near a root directory: the roots of the target
    /// then, which the next plans look at again (until one that did
    /// comes).
    to_check: Vec<CanonicalRoot>,
    exchange: host_roots::Exchange,
    handshake: handshake::Handshake,
    fleet: lifecycle::Fleet,
    ledger: ledger::Ledger,
    batches: batch::Batches,
    /// Host messages held until a generation serves the target.
    queue: host::HostQueue,
    /// The sampling/elicitation guard: rate limit, audit, answer checks.
    /// Session state, so a relaunched server gets no fresh budget.
    guard: Guard,
    /// rootfence asked the host for its roots inside a result (the
    /// stateless era's only way), once.
    host_roots_asked: bool,
    /// Actions not yet taken by the loop.
    out: Vec<Action>,
    /// The remembered handshake, until the host's `initialize` is judged.
    remembered: Option<RememberedInit>,
    /// `initialize` was answered from memory: no server is launched before
    /// the host's roots are known (or this instant passes).
    defer_launch: Option<Instant>,
    /// `initialize` was answered from memory: the first server's own answer
    /// is compared with it.
    verify_init: Option<Value>,
    /// The host closed its side while messages it sent were still held:
    /// they are delivered first, and the session ends once none is held
    /// (or at this instant, whichever comes first).
    host_closed: Option<Instant>,
    /// Warnings for the host, as MCP log messages.
    notes: notes::Notes,
    /// The last sandbox denial a server reported (the path refused and the
    /// rule that would allow it): named in the errors that end a session.
    last_denial: Option<String>,
}

impl Session {
    /// A new session (nothing is launched before the host's first message),
    /// its command discovered as `spec` and its first target `first`
    /// (made by the shell: see `crate::proxy::planner::first`). The
    /// config's `roots_observer` is the loop's to call; it is ignored
    /// here.
    pub fn new(config: SessionConfig, spec: CommandSpec, first: Planned) -> Session {
        let inputs = target::Inputs::new(
            config.policy,
            config.cli_roots,
            config.no_host_roots,
            config.command,
            config.env,
            spec,
        );
        let target = target::first(&inputs, first);
        let guard = Guard::new(&inputs.policy);
        let mut session = Session {
            inputs,
            target,
            recompute_at: None,
            planning: None,
            plans_asked: 1,
            to_check: Vec::new(),
            exchange: host_roots::Exchange::default(),
            handshake: handshake::Handshake::default(),
            fleet: lifecycle::Fleet::default(),
            ledger: ledger::Ledger::default(),
            batches: batch::Batches::default(),
            queue: host::HostQueue::default(),
            guard,
            host_roots_asked: false,
            out: Vec::new(),
            remembered: config.remembered_init,
            defer_launch: None,
            verify_init: None,
            host_closed: None,
            notes: notes::Notes::default(),
            last_denial: None,
        };
        let plan = session.target.plan.clone();
        session.plan_notes(&plan);
        session
    }

    /// React to one event at `now`.
    pub fn on_event(&mut self, ev: Event, now: Instant) {
        match ev {
            Event::Host(frame) => self.on_host_frame(frame, now),
            Event::HostEof => self.on_host_closed(now),
            Event::Server(ev) => self.on_server_event(ev, now),
            Event::PolicyChanged(p) => self.on_policy(p, now),
            Event::RootsMaybeChanged => self.on_roots_maybe_changed(now),
            Event::Launched(g, result) => self.on_launched(g, result, now),
            Event::Planned(planned) => self.on_planned(*planned, now),
        }
        self.end_once_host_done(now);
    }

    /// Fire every timer due at `now`.
    pub fn on_timer(&mut self, now: Instant) {
        self.roots_timer(now);
        if self.recompute_at.is_some_and(|d| d <= now) {
            self.recompute(target::Plan::Reported);
        }
        for key in self.ledger.due(now) {
            // Only `initialize` has a deadline: the server never answered.
            let timeout = self.inputs.policy.raw.limits.initialize_timeout_ms;
            let why = LaunchFailure::InitializeTimeout {
                timeout_ms: timeout,
            };
            tracing::error!("{why}");
            self.answer_error(
                &key,
                crate::proxy::message::code::SERVER_GONE,
                &why.to_string(),
            );
            self.end(Ending::LaunchFailed(why), now);
        }
        if self.defer_launch.is_some_and(|d| d <= now) {
            tracing::warn!(
                "the host's roots did not come in time after initialize; launching the server with the roots known"
            );
            self.defer_launch = None;
        }
        self.lifecycle_timers(now);
        self.settle(now);
        self.end_once_host_done(now);
    }

    /// The earliest instant [`Session::on_timer`] has something to do.
    pub fn next_deadline(&self) -> Option<Instant> {
        [
            self.exchange.awaiting,
            self.recompute_at,
            self.ledger.next_deadline(),
            self.lifecycle_deadline(),
            self.defer_launch,
            self.host_closed.filter(|_| self.fleet.ending().is_none()),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// Move the actions decided so far into `into` (which should be empty),
    /// in order.
    pub fn take_actions(&mut self, into: &mut Vec<Action>) {
        std::mem::swap(&mut self.out, into);
    }

    /// Whether actions wait to be taken.
    pub fn has_actions(&self) -> bool {
        !self.out.is_empty()
    }

    /// How the session ended, once it has.
    pub fn ending(&self) -> Option<&Ending> {
        self.fleet.ending()
    }

    /// Whether the session is over and every generation has exited.
    pub fn finished(&self) -> bool {
        self.fleet.ending().is_some() && self.fleet.gens.is_empty()
    }

    /// The roots the serving generation enforces.
    pub fn enforced(&self) -> &[CanonicalRoot] {
        self.fleet
            .current
            .and_then(|g| self.fleet.gens.get(&g))
            .map(|g| g.roots.as_slice())
            .unwrap_or_default()
    }

    /// Whether nothing is in flight or held: no host request, no request
    /// of rootfence's, no batch, no held message, no roots exchange, no
    /// pending recomputation, no plan being made.
    pub fn is_idle(&self) -> bool {
        self.ledger.is_empty(false)
            && self.batches.is_empty()
            && self.queue.is_empty()
            && self.exchange_idle()
            && self.recompute_at.is_none()
            && self.planning.is_none()
    }
}
