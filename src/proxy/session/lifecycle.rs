//! Generations and the fleet: the one place that launches, promotes,
//! drains, revokes, restarts and stops servers.
//!
//! Each generation has an explicit [`Phase`]; the fleet has a
//! [`FleetPhase`]. [`Session::settle`] brings the fleet to the target
//! after every change, always in this order:
//!
//! 1. **Revocation first.** Every generation whose rights are not within
//!    the target's is killed at once (SIGKILL, no grace): its requests in
//!    flight get an error naming what was revoked, and no generation is
//!    promoted (announced to the server with `roots/list_changed`, given
//!    host traffic) until every revoked one has exited. Its exit is
//!    reported by its reaper, after the process and (in its own PID
//!    namespace) every descendant are gone.
//! 2. **One target.** The serving generation stays while its rights are
//!    the same as the target's (and it was offered what the policy offers
//!    now); a change of root names only is told to it. Otherwise the
//!    newest starting generation launched for the target is promoted once
//!    its handshake is through; starting generations with any other plan
//!    are stopped, never promoted; if there is none, the target is
//!    launched. A restart after a crash launches the target, never the
//!    plan enforced before.
//! 3. **Drain.** A replaced generation whose rights were not revoked
//!    finishes its requests in flight within `limits.drain_timeout_ms`.
//! 4. Host requests held meanwhile are sent to the serving generation.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

use super::Session;

/// How long a server whose stdout closed may take to end on its own before
/// it is killed: a crashing server closes its stdout as it exits, and its
/// exit status and last stderr lines say why; one that keeps running
/// without a stdout is killed.
const LOST_GRACE: Duration = Duration::from_millis(100);
use super::entitlements::{self, Entitlements};
use super::host_roots::RootsUnknown;
use super::io::ExitInfo;
use super::io::{Action, Ending, GenId, Gone, LaunchError, LaunchFailure, ServerEnd, Stop};
use super::ledger::{HostState, Method, Own};
use crate::policy::RestartName;
use crate::proxy::message::{self, code};
use crate::roots::CanonicalRoot;

/// How a generation is brought up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BringUp {
    /// The host drives its handshake (the first generation, or one
    /// launched before the first handshake was through): rootfence sends it
    /// the host's own `initialize`.
    Direct,
    /// rootfence replays the recorded handshake before promoting it.
    Replay,
}

/// Why a generation is being stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StopWhy {
    /// Its rights are not within the target (what was revoked). Killed.
    Revoked(Revocation),
    /// Its stdout closed while it ran. Killed; whether to restart is
    /// decided when it has exited (`was`: what it was then).
    Lost(Role),
    /// Replaced by a newer generation, or not needed (a starting
    /// generation whose plan is no longer the target).
    Replaced,
    /// The session is ending.
    SessionEnd,
}

/// What a generation was to the fleet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The serving generation.
    Current,
    /// Starting, not yet promoted.
    Rising,
    /// Draining.
    Other,
}

/// A generation's phase.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Phase {
    /// Asked for; the launcher has not reported.
    Launching,
    /// Answering its replayed `initialize`, until `deadline`.
    Handshaking {
        /// After this, the session fails closed.
        deadline: Instant,
    },
    /// Up and through its handshake (if rootfence replays one), waiting to
    /// be promoted.
    Ready,
    /// The serving generation: host traffic goes to it.
    Serving,
    /// Replaced: finishing the host requests it has in flight until `until`.
    Draining {
        /// Then they get an error and it is stopped.
        until: Instant,
    },
    /// Stopped; waiting for its exit.
    Stopping(StopWhy),
}

impl Phase {
    /// Launching, handshaking or ready: not yet promoted.
    pub fn rising(&self) -> bool {
        matches!(
            self,
            Phase::Launching | Phase::Handshaking { .. } | Phase::Ready
        )
    }

    /// Stopped.
    pub fn stopping(&self) -> bool {
        matches!(self, Phase::Stopping(_))
    }

    /// Killed: nothing it sends reaches anyone.
    pub fn killed(&self) -> bool {
        matches!(
            self,
            Phase::Stopping(StopWhy::Revoked(_) | StopWhy::Lost(_))
        )
    }
}

/// One server generation as the session sees it.
#[derive(Debug)]
pub struct Gen {
    /// Its number.
    pub id: GenId,
    /// What that plan grants.
    pub rights: Arc<Entitlements>,
    /// What its `roots/list` is answered with: its plan's roots, with the
    /// names of the latest target when only those changed.
    pub roots: Vec<CanonicalRoot>,
    /// How it is brought up.
    pub bring_up: BringUp,
    /// The capabilities its `initialize` offered, once sent.
    pub offer: Option<Value>,
    /// Its phase.
    pub phase: Phase,
    /// It was sent `notifications/initialized`.
    pub initialized: bool,
    /// Its replayed `initialize`'s result.
    pub init_result: Option<Value>,
    /// Its rights are the same as the target's and it was offered what
    /// the target offers (refreshed by `settle`).
    pub matches: bool,
    /// A sandbox denial it reported on its stderr (the hint), added to the
    /// error its requests get when it exits unexpectedly.
    pub denied: Option<String>,
}

/// The fleet's phase.
#[derive(Debug, Clone)]
pub enum FleetPhase {
    /// No host message yet: no server wanted.
    Dormant,
    /// Serving, or converging on the target.
    Live,
    /// After a crash: no launch before `until` (restart backoff).
    Backoff {
        /// End of the backoff.
        until: Instant,
    },
    /// Ending: every generation is stopped, none is launched.
    Ending(Ending),
}

/// Every generation of the session.
#[derive(Debug)]
pub struct Fleet {
    /// Generations not yet exited, by number.
    pub gens: BTreeMap<GenId, Gen>,
    /// The serving generation.
    pub current: Option<GenId>,
    next: GenId,
    /// The fleet's phase.
    pub phase: FleetPhase,
    /// Restarts after crashes so far.
    pub restarts: u32,
}

impl Default for Fleet {
    fn default() -> Self {
        Fleet {
            gens: BTreeMap::new(),
            current: None,
            next: 1,
            phase: FleetPhase::Dormant,
            restarts: 0,
        }
    }
}

impl Fleet {
    /// Whether a killed (revoked) generation has not exited yet.
    pub fn revoked_alive(&self) -> bool {
        self.gens
            .values()
            .any(|g| matches!(g.phase, Phase::Stopping(StopWhy::Revoked(_))))
    }

    /// Whether a generation whose stdout closed has not exited yet (the
    /// restart decision waits for its exit status).
    pub fn lost_alive(&self) -> bool {
        self.gens
            .values()
            .any(|g| matches!(g.phase, Phase::Stopping(StopWhy::Lost(_))))
    }

    /// The serving generation, if it serves the target.
    pub fn serving_target(&self) -> Option<GenId> {
        self.current
            .filter(|g| self.gens.get(g).is_some_and(|s| s.matches))
    }

    /// Whether the session is ending.
    pub fn ending(&self) -> Option<&Ending> {
        match &self.phase {
            FleetPhase::Ending(e) => Some(e),
            _ => None,
        }
    }
}

/// The error a host request gets when its generation is stopped because
/// its rights were revoked.
/// Why a generation's rights were revoked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Revocation {
    /// No policy can be applied: nothing runs (the suspension, as the
    /// target says it).
    Suspended(String),
    /// It holds rights outside the target.
    Excess(Vec<entitlements::Excess>),
}

impl std::fmt::Display for Revocation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Revocation::Suspended(why) => f.write_str(why),
            Revocation::Excess(excess) => f.write_str(&entitlements::describe(excess)),
        }
    }
}

fn revoked_message(why: &Revocation) -> String {
    match why {
        Revocation::Suspended(why) => format!("{why}; the request may not have completed"),
        Revocation::Excess(_) => format!(
            "rootfence stopped the server because its rights were revoked ({why}); the request may not have completed"
        ),
    }
}

impl Session {
    /// Bring the fleet to the target (see the module documentation for the
    /// order). Called after every change of the target, a generation or
    /// the host roots exchange.
    pub(super) fn settle(&mut self, now: Instant) {
        self.refresh(now);
        if self.fleet.ending().is_some() || matches!(self.fleet.phase, FleetPhase::Dormant) {
            return;
        }
        if let Some(why) = self.target.suspended.clone() {
            // Nothing runs: what the host sent meanwhile is answered now.
            self.refuse_held(&why);
        }
        self.rename();
        if self.fleet.serving_target().is_some() {
            // Nothing starting is needed.
            let rising: Vec<GenId> = self
                .fleet
                .gens
                .values()
                .filter(|g| g.phase.rising())
                .map(|g| g.id)
                .collect();
            for g in rising {
                self.stop(g, StopWhy::Replaced);
            }
        } else {
            let candidate = self
                .fleet
                .gens
                .values()
                .filter(|g| g.phase.rising() && g.matches)
                .map(|g| g.id)
                .max();
            let others: Vec<GenId> = self
                .fleet
                .gens
                .values()
                .filter(|g| g.phase.rising() && Some(g.id) != candidate)
                .map(|g| g.id)
                .collect();
            for g in others {
                tracing::info!(
                    generation = g,
                    "its plan is no longer the target: stopping it"
                );
                self.stop(g, StopWhy::Replaced);
            }
            match candidate {
                Some(g) => {
                    let ready = self
                        .fleet
                        .gens
                        .get(&g)
                        .is_some_and(|s| s.phase == Phase::Ready);
                    if ready && self.may_promote() {
                        self.promote(g, now);
                    }
                }
                None => {
                    if self.may_launch() {
                        self.launch(now);
                    }
                }
            }
        }
        self.flush();
    }

    /// Compare every generation with the target: revoke those with rights
    /// outside it, and note which ones serve it.
    fn refresh(&mut self, now: Instant) {
        let offer = self.handshake.offer(&self.target.policy);
        let mut revoked = Vec::new();
        for g in self.fleet.gens.values_mut() {
            if matches!(g.phase, Phase::Stopping(StopWhy::Revoked(_))) {
                g.matches = false;
                continue;
            }
            // A policy that cannot be applied grants nothing.
            if let Some(why) = &self.target.suspended {
                revoked.push((g.id, Revocation::Suspended(why.clone())));
                g.matches = false;
                continue;
            }
            // A generation closing gracefully, or lost and given a moment
            // to end, is killed at once when its rights are revoked
            // meanwhile.
            let excess = g.rights.excess(&self.target.rights);
            if !excess.is_empty() {
                revoked.push((g.id, Revocation::Excess(excess)));
                g.matches = false;
                continue;
            }
            if g.phase.killed() {
                g.matches = false;
                continue;
            }
            g.matches = !g.phase.stopping()
                && self.target.rights.within(&g.rights)
                && (g.offer.is_none() || g.offer == offer);
        }
        for (g, why) in revoked {
            self.revoke(g, why, now);
        }
    }

    /// Kill `g` at once: its rights are not within the target.
    fn revoke(&mut self, g: GenId, why: Revocation, _now: Instant) {
        tracing::warn!(
            generation = g,
            "rights revoked ({why}): killing the server at once"
        );
        // Its requests in flight: answered now (nothing it sends from now
        // on is read). The host's `initialize` is sent again to the next
        // generation instead: it has no effect to lose.
        for key in self.ledger.sent_to(g) {
            let init = self
                .ledger
                .host(key.as_str())
                .is_some_and(|r| r.method == Method::Initialize);
            if init && self.fleet.ending().is_none() {
                if let Some(r) = self.ledger.host_mut(key.as_str()) {
                    r.state = HostState::Queued;
                }
                self.queue.requeue(key);
            } else {
                self.answer_error(&key, code::SERVER_GONE, &revoked_message(&why));
            }
        }
        self.stop(g, StopWhy::Revoked(why));
    }

    /// Stop `g`: killed when revoked or lost, else closed gracefully. A
    /// generation closing gracefully can still be killed.
    pub(super) fn stop(&mut self, g: GenId, why: StopWhy) {
        let grace = Duration::from_millis(self.inputs.policy.raw.limits.shutdown_grace_ms);
        let how = match &why {
            StopWhy::Revoked(_) => Stop::Kill,
            StopWhy::Lost(_) => Stop::KillSoon(LOST_GRACE),
            _ => Stop::Graceful(grace),
        };
        let Some(generation) = self.fleet.gens.get_mut(&g) else {
            return;
        };
        let kill = matches!(why, StopWhy::Revoked(_) | StopWhy::Lost(_));
        // A lost server waits a moment for its own end; a revocation meanwhile
        // kills it at once.
        let upgrade = matches!(why, StopWhy::Revoked(_))
            && matches!(generation.phase, Phase::Stopping(StopWhy::Lost(_)));
        if !upgrade && (generation.phase.killed() || (generation.phase.stopping() && !kill)) {
            return;
        }
        tracing::debug!(generation = g, ?why, "stopping the server");
        generation.phase = Phase::Stopping(why);
        generation.matches = false;
        if self.fleet.current == Some(g) {
            self.fleet.current = None;
        }
        // Requests on the host's behalf stay until answered or until it
        // exits; everything else it was owed is dropped.
        self.ledger.forget_gen(g, !kill);
        self.out.push(Action::Stop(g, how));
    }

    fn may_promote(&self) -> bool {
        !self.fleet.revoked_alive()
            && self.exchange.awaiting.is_none()
            && !self.planning.is_some_and(|p| p.hold)
    }

    fn may_launch(&self) -> bool {
        if !matches!(self.fleet.phase, FleetPhase::Live)
            || self.fleet.lost_alive()
            || self.target.suspended.is_some()
        {
            return false;
        }
        // `initialize` answered from memory: the one launch waits for the
        // host's roots.
        if self.defer_launch.is_some() && !(self.handshake.host_initialized && self.exchange_idle())
        {
            return false;
        }
        // While the host's `initialize` is in flight, a replacement could
        // be neither replayed (no answer to replay) nor driven by the host.
        !self.ledger.initialize_sent()
    }

    /// Launch a generation for the target.
    fn launch(&mut self, _now: Instant) {
        let g = self.fleet.next;
        self.fleet.next += 1;
        let bring_up = if self.handshake.server_init.is_some() {
            BringUp::Replay
        } else {
            BringUp::Direct
        };
        tracing::info!(
            generation = g,
            roots = self.target.roots().len(),
            "launching the server for the target"
        );
        self.fleet.gens.insert(
            g,
            Gen {
                id: g,
                rights: self.target.rights.clone(),
                roots: self.target.roots().to_vec(),
                bring_up,
                offer: None,
                phase: Phase::Launching,
                initialized: false,
                init_result: None,
                matches: true,
                denied: None,
            },
        );
        self.out.push(Action::Launch(g, self.target.plan.clone()));
    }

    /// The launcher's report.
    pub(super) fn on_launched(&mut self, g: GenId, result: Result<u32, LaunchError>, now: Instant) {
        let stopping = self.fleet.gens.get(&g).is_none_or(|s| s.phase.stopping());
        let pid = match result {
            Ok(pid) => pid,
            Err(e) => {
                tracing::error!(generation = g, "cannot launch the server: {e}");
                self.fleet.gens.remove(&g);
                if !stopping {
                    // Fail closed: no server is better than one with the
                    // wrong rights.
                    self.end(
                        Ending::LaunchFailed(LaunchFailure::Launch(Arc::new(e))),
                        now,
                    );
                }
                self.settle(now);
                return;
            }
        };
        if stopping {
            // Stopped before its launch was reported: it exists now.
            self.out.push(Action::Stop(g, Stop::Kill));
            return;
        }
        let timeout = Duration::from_millis(self.inputs.policy.raw.limits.initialize_timeout_ms);
        let Some(generation) = self.fleet.gens.get_mut(&g) else {
            return;
        };
        tracing::info!(
            generation = g,
            pid,
            roots = generation.roots.len(),
            "server launched"
        );
        match generation.bring_up {
            BringUp::Replay => {
                let id = self.ledger.own_send(g, Own::Initialize);
                let line = self.handshake.initialize_line(&id, &self.target.policy);
                generation.offer = self.handshake.offer(&self.target.policy);
                generation.phase = Phase::Handshaking {
                    deadline: now + timeout,
                };
                self.out.push(Action::ToServer(g, line));
            }
            BringUp::Direct => generation.phase = Phase::Ready,
        }
        self.settle(now);
    }

    /// A rebuilt generation answered its replayed `initialize`.
    pub(super) fn on_replayed_init(&mut self, g: GenId, result: Option<&str>, now: Instant) {
        let Some(result) = result else {
            tracing::error!(
                generation = g,
                "the relaunched server refused the replayed initialize"
            );
            self.end(Ending::LaunchFailed(LaunchFailure::ReplayRefused), now);
            return;
        };
        if let Some(generation) = self.fleet.gens.get_mut(&g)
            && matches!(generation.phase, Phase::Handshaking { .. })
        {
            generation.init_result = serde_json::from_str(result).ok();
            generation.phase = Phase::Ready;
            self.out.push(Action::ServerStarted(g));
            if let Some(told) = self.verify_init.take() {
                // The host was answered from memory: check it against the
                // server's own answer.
                self.defer_launch = None;
                let real = generation.init_result.clone();
                if real.as_ref() != Some(&told) {
                    tracing::warn!(
                        "the server's initialize answer differs from the one the host got; remembering the new one for the next session"
                    );
                    if let Some(real) = &real {
                        self.tell_init_difference(&told, real);
                    }
                    self.handshake.server_init = real;
                    self.remember_init(result);
                }
            }
        }
        self.settle(now);
    }

    /// Make `g` the serving generation.
    fn promote(&mut self, g: GenId, now: Instant) {
        let host_initialized = self.handshake.host_initialized;
        let Some(generation) = self.fleet.gens.get_mut(&g) else {
            return;
        };
        generation.phase = Phase::Serving;
        let replay = generation.bring_up == BringUp::Replay;
        let mut lines = Vec::new();
        if replay {
            if host_initialized && !generation.initialized {
                generation.initialized = true;
                lines.push(message::notification("notifications/initialized", None));
            }
            for (method, params, kind) in self.handshake.replay(generation.init_result.as_ref()) {
                let id = self.ledger.own_send(g, kind);
                lines.push(message::request(&id, method, Some(&params.to_string())));
            }
            lines.push(message::notification(
                "notifications/roots/list_changed",
                None,
            ));
        }
        let paths: Vec<PathBuf> = generation.roots.iter().map(|r| r.path.clone()).collect();
        for l in lines {
            self.out.push(Action::ToServer(g, l));
        }
        self.out.push(Action::WatchRoots(paths));
        let old = self.fleet.current.replace(g);
        if let Some(old) = old.filter(|o| *o != g) {
            self.retire(old, now);
        }
        if replay {
            tracing::info!(generation = g, "rebuild complete");
        } else {
            tracing::debug!(generation = g, "serving");
        }
    }

    /// A replaced generation: drain its requests in flight, or stop it.
    fn retire(&mut self, g: GenId, now: Instant) {
        let drain = Duration::from_millis(self.inputs.policy.raw.limits.drain_timeout_ms);
        if self.ledger.any_sent_to(g) {
            if let Some(generation) = self.fleet.gens.get_mut(&g) {
                generation.phase = Phase::Draining { until: now + drain };
            }
        } else {
            self.stop(g, StopWhy::Replaced);
        }
    }

    /// A host request of `g` was answered: a draining generation with
    /// nothing left is stopped.
    pub(super) fn after_answer(&mut self, g: GenId) {
        let draining = self
            .fleet
            .gens
            .get(&g)
            .is_some_and(|s| matches!(s.phase, Phase::Draining { .. }));
        if draining && !self.ledger.any_sent_to(g) {
            self.stop(g, StopWhy::Replaced);
        }
    }

    /// Root names (or merged roots) changed with the same rights: tell the
    /// serving generation, no relaunch.
    fn rename(&mut self) {
        let target = self.target.roots();
        let mut notify = None;
        for generation in self.fleet.gens.values_mut() {
            if !generation.matches {
                continue;
            }
            let same = generation.roots.len() == target.len()
                && generation
                    .roots
                    .iter()
                    .zip(target)
                    .all(|(a, b)| a.path == b.path && a.uri == b.uri && a.name == b.name);
            if same {
                continue;
            }
            generation.roots = target.to_vec();
            if self.fleet.current == Some(generation.id) {
                notify = Some((
                    generation.id,
                    generation.roots.iter().map(|r| r.path.clone()).collect(),
                ));
            }
        }
        if let Some((g, paths)) = notify {
            tracing::info!("root names changed: notifying the server, no relaunch");
            self.out.push(Action::ToServer(
                g,
                message::notification("notifications/roots/list_changed", None),
            ));
            self.out.push(Action::WatchRoots(paths));
        }
    }

    /// The stdout of `g` closed.
    pub(super) fn on_stdout_closed(&mut self, g: GenId, now: Instant) {
        let role = match self.fleet.gens.get(&g) {
            Some(generation) if generation.phase.stopping() => return,
            Some(generation) if self.fleet.current == Some(g) => {
                let _ = generation;
                Role::Current
            }
            Some(generation) if generation.phase.rising() => Role::Rising,
            Some(_) => Role::Other,
            None => return,
        };
        tracing::warn!(generation = g, "the server closed its stdout: stopping it");
        self.stop(g, StopWhy::Lost(role));
        self.settle(now);
    }

    /// `g` reported a sandbox denial on its stderr: kept to say why if it
    /// ends, and told to the host.
    pub(super) fn on_denied(&mut self, g: GenId, hint: String) {
        if let Some(generation) = self.fleet.gens.get_mut(&g) {
            generation.denied = Some(hint.clone());
        }
        self.last_denial = Some(hint.clone());
        self.tell_host(format!("rootfence: {hint}"));
    }

    /// `g` exited (its reaper saw the process end).
    pub(super) fn on_exited(&mut self, g: GenId, status: Option<ExitInfo>, now: Instant) {
        let Some(generation) = self.fleet.gens.remove(&g) else {
            return;
        };
        if self.fleet.current == Some(g) {
            self.fleet.current = None;
        }
        if self.answer_for_a_server_without_its_roots(g, now) {
            self.ledger.forget_gen(g, false);
            for key in self.ledger.sent_to(g) {
                self.answer_error(
                    &key,
                    code::SERVER_GONE,
                    "the server exited before answering",
                );
            }
            self.settle(now);
            return;
        }
        self.ledger.forget_gen(g, false);
        self.guard.generation_gone(g);
        let what = status.map_or_else(|| "ended".to_string(), |s| s.to_string());
        let killed_by_us = status == Some(ExitInfo::Signal(9));
        let (why, role) = match &generation.phase {
            Phase::Stopping(StopWhy::Revoked(w)) => (revoked_message(w), None),
            Phase::Stopping(StopWhy::Lost(role)) if killed_by_us => (
                "the server closed its stdout before answering and was stopped".to_string(),
                Some(*role),
            ),
            Phase::Stopping(StopWhy::Lost(role)) => (
                format!("the server closed its stdout and exited ({what}) before answering"),
                Some(*role),
            ),
            Phase::Stopping(StopWhy::Replaced) => (
                "the server was restarted because its roots changed".to_string(),
                None,
            ),
            Phase::Stopping(StopWhy::SessionEnd) => ("the session is ending".to_string(), None),
            Phase::Serving => (
                format!("the server exited ({what}) before answering"),
                Some(Role::Current),
            ),
            Phase::Draining { .. } => (
                format!("the server exited ({what}) before answering"),
                Some(Role::Other),
            ),
            _ => (
                format!("the server exited ({what}) before answering"),
                Some(Role::Rising),
            ),
        };
        // An unexpected end, with a denial on its stderr: say why.
        let why = match (&role, &generation.denied) {
            (Some(_), Some(hint)) => format!("{why}; {hint}"),
            _ => why,
        };
        if role.is_some() {
            tracing::warn!(generation = g, "server exited unexpectedly ({what})");
        } else {
            tracing::debug!(generation = g, "server stopped ({what})");
        }
        for key in self.ledger.sent_to(g) {
            self.answer_error(&key, code::SERVER_GONE, &why);
        }
        let failed = killed_by_us || !status.is_some_and(ExitInfo::success);
        match role {
            Some(Role::Current) => self.crashed(false, failed, status, killed_by_us, now),
            Some(Role::Rising) => self.crashed(true, failed, status, killed_by_us, now),
            _ => {}
        }
        self.settle(now);
    }

    /// The serving (or a starting) generation ended by itself: restart as
    /// `limits.restart` says, or end the session.
    fn crashed(
        &mut self,
        rising: bool,
        failed: bool,
        status: Option<ExitInfo>,
        lost: bool,
        now: Instant,
    ) {
        if self.fleet.ending().is_some() {
            return;
        }
        // A starting generation for the target takes over: no restart.
        if !rising
            && self
                .fleet
                .gens
                .values()
                .any(|g| g.phase.rising() && g.matches)
        {
            return;
        }
        let limits = &self.inputs.policy.raw.limits;
        let restart = match limits.restart {
            RestartName::Never => false,
            RestartName::OnFailure => failed,
            RestartName::Always => true,
        };
        let gone = if lost {
            Gone::ClosedStdout
        } else {
            Gone::Exited(status)
        };
        let first = self.handshake.server_init.is_none();
        if !restart || self.fleet.restarts >= limits.max_restarts || first {
            // The last thing the sandbox refused it, with the rule that
            // would allow it: also after every restart is used up.
            let denial = self.last_denial.clone();
            let why = if restart && !first {
                ServerEnd::RestartsUsedUp {
                    gone,
                    max_restarts: limits.max_restarts,
                    denial,
                }
            } else if rising {
                ServerEnd::InHandshake { gone, denial }
            } else {
                ServerEnd::Ended { gone, denial }
            };
            self.end(Ending::ServerEnded(why), now);
            return;
        }
        let backoff = limits
            .restart_backoff_ms
            .saturating_mul(1u64 << self.fleet.restarts.min(16));
        self.fleet.restarts += 1;
        tracing::warn!(
            attempt = self.fleet.restarts,
            "restarting the server in {backoff} ms"
        );
        self.fleet.phase = FleetPhase::Backoff {
            until: now + Duration::from_millis(backoff),
        };
    }

    /// End the session: every generation is stopped, and every host
    /// request gets an answer (those in flight on a server closed by the
    /// host may still be answered by it during the grace period).
    pub(super) fn end(&mut self, why: Ending, now: Instant) {
        let _ = now;
        if self.fleet.ending().is_none() {
            tracing::info!("session ending: {why:?}");
            self.fleet.phase = FleetPhase::Ending(why.clone());
        }
        let message = match self.fleet.ending() {
            Some(Ending::LaunchFailed(e)) => {
                Some(format!("rootfence could not launch the server: {e}"))
            }
            Some(Ending::ServerEnded(w)) => Some(w.to_string()),
            _ => None,
        };
        for key in self.ledger.host_keys() {
            let sent = self.ledger.host(key.as_str()).and_then(|r| r.generation());
            match (&message, sent) {
                (Some(m), _) => self.answer_error(&key, code::SERVER_GONE, m),
                (None, None) => self.answer_error(&key, code::SERVER_GONE, "the session is ending"),
                (None, Some(_)) => {}
            }
        }
        self.queue.clear();
        let live: Vec<GenId> = self
            .fleet
            .gens
            .values()
            .filter(|g| !g.phase.stopping())
            .map(|g| g.id)
            .collect();
        for g in live {
            self.stop(g, StopWhy::SessionEnd);
        }
        self.recompute_at = None;
        self.exchange.awaiting = None;
    }

    /// The host closed its side. What it sent before is not lost: held
    /// messages are still delivered (a stdio client may write its requests
    /// and close at once, as a pipe does), servers keep their stdin (so
    /// rootfence can still answer their `roots/list`) until every host
    /// request is answered, and then the session ends. The host can answer
    /// nothing more: a question about its roots is given up (its roots
    /// dropped: fail closed), a launch waiting for them goes ahead with the
    /// roots known, and a server's request for the host is refused at
    /// once. The wait is at most `limits.initialize_timeout_ms`; then
    /// servers are stopped as at any session's end.
    pub(super) fn on_host_closed(&mut self, now: Instant) {
        if self.host_closed.is_some() {
            return;
        }
        if self.host_done() || self.fleet.ending().is_some() {
            // Its roots, if it was asked for them, are dropped all the
            // same: a server holding one is killed, not given a grace.
            let asked = self.exchange.awaiting.is_some();
            self.end(Ending::HostClosed, now);
            if asked {
                self.drop_host_roots(RootsUnknown::HostClosed);
                self.recompute(super::target::Plan::Held);
            }
            return;
        }
        tracing::info!(
            "the host closed its side: delivering what it sent before and waiting for the answers, then ending the session"
        );
        let timeout = Duration::from_millis(self.inputs.policy.raw.limits.initialize_timeout_ms);
        self.host_closed = Some(now + timeout);
        self.defer_launch = None;
        self.give_up_host_roots(RootsUnknown::HostClosed);
        self.settle(now);
    }

    /// Whether the host closed its side (it can answer nothing more).
    pub(super) fn host_gone(&self) -> bool {
        self.host_closed.is_some()
    }

    /// Nothing the host sent is held or unanswered.
    fn host_done(&self) -> bool {
        self.queue.is_empty() && self.ledger.host_none()
    }

    /// End the session once the host has closed and everything it sent is
    /// answered (or the wait for that is over).
    pub(super) fn end_once_host_done(&mut self, now: Instant) {
        let Some(deadline) = self.host_closed else {
            return;
        };
        if self.fleet.ending().is_none() && (self.host_done() || deadline <= now) {
            if !self.host_done() {
                tracing::warn!(
                    "the host closed its side and its requests were not all answered within limits.initialize_timeout_ms: ending the session"
                );
            }
            self.end(Ending::HostClosed, now);
        }
    }

    /// Timers of the lifecycle that are due: backoffs, handshakes, drains.
    pub(super) fn lifecycle_timers(&mut self, now: Instant) {
        if let FleetPhase::Backoff { until } = self.fleet.phase
            && until <= now
        {
            self.fleet.phase = FleetPhase::Live;
        }
        let timeout = self.inputs.policy.raw.limits.initialize_timeout_ms;
        let late = self
            .fleet
            .gens
            .values()
            .any(|g| matches!(g.phase, Phase::Handshaking { deadline } if deadline <= now));
        if late && self.fleet.ending().is_none() {
            tracing::error!("the relaunched server did not answer initialize in time");
            self.end(
                Ending::LaunchFailed(LaunchFailure::ReplayTimeout {
                    timeout_ms: timeout,
                }),
                now,
            );
        }
        let drained: Vec<GenId> = self
            .fleet
            .gens
            .values()
            .filter(|g| matches!(g.phase, Phase::Draining { until } if until <= now))
            .map(|g| g.id)
            .collect();
        for g in drained {
            for key in self.ledger.sent_to(g) {
                self.answer_error(
                    &key,
                    code::SERVER_GONE,
                    "the server was restarted because its roots changed, and this request did not finish in time",
                );
            }
            self.stop(g, StopWhy::Replaced);
        }
    }

    /// The lifecycle's earliest timer.
    pub(super) fn lifecycle_deadline(&self) -> Option<Instant> {
        let gens = self.fleet.gens.values().filter_map(|g| match g.phase {
            Phase::Handshaking { deadline } => Some(deadline),
            Phase::Draining { until } => Some(until),
            _ => None,
        });
        let backoff = match self.fleet.phase {
            FleetPhase::Backoff { until } => Some(until),
            _ => None,
        };
        gens.chain(backoff).min()
    }

    /// The host's `initialize` was just recorded: answer it from the
    /// remembered handshake (the result, as JSON text) when the server
    /// would be sent exactly the remembered `initialize`, no server runs
    /// yet, and the roots will come from the host. The launch then waits
    /// for the host's roots (at most `limits.roots_timeout_ms`, when the
    /// roots exchange gives up, or `limits.initialize_timeout_ms`).
    pub(super) fn answer_from_memory(&mut self, now: Instant) -> Option<String> {
        let remembered = self.remembered.take()?;
        let untouched = matches!(self.fleet.phase, FleetPhase::Dormant)
            && self.fleet.gens.is_empty()
            && self.handshake.host_has_roots
            && self.inputs.accepts_host_roots();
        if !untouched {
            return None;
        }
        if self.handshake.initialize_params(&self.target.policy) != remembered.params {
            tracing::debug!("initialize differs from the remembered one: starting the server");
            return None;
        }
        let result = remembered.result.to_string();
        self.handshake.record_server_init(&result);
        let result = self.handshake.offer_logging(&result).unwrap_or(result);
        tracing::info!(
            "initialize answered as this server answered it before; launching it once the host's roots are known"
        );
        let timeout = Duration::from_millis(self.inputs.policy.raw.limits.initialize_timeout_ms);
        self.defer_launch = Some(now + timeout);
        self.verify_init = Some(remembered.result);
        self.wake();
        Some(result)
    }

    /// The first server, launched before the host said its roots, exited
    /// before answering the host's `initialize`: a server that needs its
    /// directory to start (a vault, a database it names) cannot see it yet.
    /// When the host declared roots and the policy takes them, rootfence
    /// answers that `initialize` itself (a provisional answer offering
    /// only logging, which rootfence keeps itself) and launches the server once
    /// the host's roots are known, replaying the same `initialize`; the
    /// server's own answer is remembered for the next session, which is
    /// answered from memory (one start). Whether it did so.
    fn answer_for_a_server_without_its_roots(&mut self, g: GenId, now: Instant) -> bool {
        if self.handshake.server_init.is_some()
            || !(self.handshake.host_has_roots && self.inputs.accepts_host_roots())
            || self.host_roots_asked_ever()
            || self.fleet.ending().is_some()
        {
            return false;
        }
        let Some(key) = self.ledger.sent_to(g).into_iter().find(|k| {
            self.ledger
                .host(k.as_str())
                .is_some_and(|r| r.method == Method::Initialize)
        }) else {
            return false;
        };
        let version = self
            .handshake
            .host_init
            .as_ref()
            .and_then(|p| p.get("protocolVersion"))
            .and_then(Value::as_str)
            .and_then(crate::proxy::guard::Revision::known)
            .filter(|r| !r.is_stateless())
            .unwrap_or(crate::proxy::guard::Revision::V2025_11_25)
            .to_string();
        // Only what rootfence keeps itself (logging: its own notes and
        // the host's level); what the server offers is told when it
        // answers (`tell_init_difference`).
        let result = serde_json::json!({
            "protocolVersion": version,
            "capabilities": {"logging": {}},
            "serverInfo": {"name": self.inputs.command_name(), "version": "0"},
        });
        tracing::warn!(
            generation = g,
            "the server exited before answering initialize, before the host's roots were known: answering initialize for it, and launching it again under the host's roots"
        );
        let text = result.to_string();
        self.handshake.record_server_init(&text);
        self.handshake.logging_offered = true;
        self.answer_with(key.as_str(), |id| message::result_response(id, &text));
        let timeout = Duration::from_millis(self.inputs.policy.raw.limits.initialize_timeout_ms);
        self.defer_launch = Some(now + timeout);
        self.verify_init = Some(result);
        true
    }

    /// The host was answered `told` (from memory, or provisionally) and
    /// the server then answered `real`: each list the server offers that
    /// `told` did not is announced (`notifications/{tools,prompts,resources}/list_changed`),
    /// and every difference the host cannot learn otherwise (a list
    /// promised that the server lacks, another protocol revision) is told
    /// as a note.
    fn tell_init_difference(&mut self, told: &Value, real: &Value) {
        let has = |v: &Value, c: &str| v.pointer(&format!("/capabilities/{c}")).is_some();
        let mut missing = Vec::new();
        for c in ["tools", "prompts", "resources"] {
            match (has(told, c), has(real, c)) {
                (false, true) => {
                    let n = format!("notifications/{c}/list_changed");
                    self.send_host(message::notification(&n, None));
                }
                (true, false) => missing.push(c),
                _ => {}
            }
        }
        let version = |v: &Value| {
            v.get("protocolVersion")
                .and_then(Value::as_str)
                .unwrap_or("?")
                .to_string()
        };
        let mut said = Vec::new();
        if !missing.is_empty() {
            said.push(format!(
                "it offers no {} (requests for them fail)",
                missing.join(", ")
            ));
        }
        if version(told) != version(real) {
            said.push(format!(
                "it speaks protocol revision {}, not {} as the host was told (reconnect to use it)",
                version(real),
                version(told)
            ));
        }
        if !said.is_empty() {
            self.tell_host(format!(
                "rootfence: the host's initialize was answered before the server could start; the server's own answer differs: {}",
                said.join("; ")
            ));
        }
    }

    /// The first handshake went through a server: remember it for the next
    /// session of this command, when that session could use it.
    pub(super) fn remember_init(&mut self, result: &str) {
        if !(self.handshake.host_has_roots && self.inputs.accepts_host_roots()) {
            return;
        }
        let Ok(result) = serde_json::from_str::<Value>(result) else {
            return;
        };
        let params = self.handshake.initialize_params(&self.target.policy);
        self.out.push(Action::RememberInit(
            crate::proxy::init_cache::RememberedInit { params, result },
        ));
    }

    /// A message from the host: the fleet wakes up.
    pub(super) fn wake(&mut self) {
        if matches!(self.fleet.phase, FleetPhase::Dormant) {
            self.fleet.phase = FleetPhase::Live;
        }
    }
}
