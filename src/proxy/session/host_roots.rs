//! Asking the host for its roots.
//!
//! rootfence asks (`roots/list`, its own id) after the host's
//! `notifications/initialized` and after each `notifications/roots/list_changed`,
//! when the host declared roots and the policy takes them. Host traffic is
//! held from then until the answer has been planned (off the loop), turned
//! into the new target and the fleet has settled on it. Changes announced while a request is in
//! flight are folded into one more request; each answer applies as it
//! arrives (a root it revokes is revoked at once), and the newest decides.
//!
//! Revocation never waits on the host: when no readable answer comes
//! within `limits.roots_timeout_ms` (the host is silent, answers with
//! an error or with something unreadable), or its answer's plan does not
//! (a root whose directory does not answer), the host's roots are dropped
//! from the target, so every server keeps only what the host cannot have
//! revoked (the roots of the command line and of the policy), and host
//! traffic is released. The question stays asked: a late answer still
//! applies, and the next change asks again.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::Session;
use super::target::Plan;
use super::ledger::ToHost;
use crate::proxy::message;
use crate::roots::{Access, RootInput};

/// The state of the exchange.
#[derive(Debug, Default)]
pub struct Exchange {
    /// The number of the newest `roots/list` asked, until it is answered.
    asked: Option<u64>,
    /// Its answer did not come in time: the host's roots were dropped.
    late: bool,
    /// A change was announced while it was in flight: ask again.
    again: bool,
    /// Host traffic is held until the answer, or until this instant.
    pub awaiting: Option<Instant>,
    /// How many were asked.
    count: u64,
}

/// Why the host's roots are not known (its roots are dropped meanwhile).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(super) enum RootsUnknown {
    /// It answered `roots/list` with an error.
    #[error("the host answered with an error")]
    HostError,
    /// Its result is not a list of roots rootfence can read.
    #[error("the host's roots/list result is unreadable")]
    Unreadable,
    /// Its answer was not relayed (too long, or not read one way).
    #[error("{0}")]
    NotRelayed(super::io::Unrelayable),
    /// It did not answer in time.
    #[error("no answer to roots/list within limits.roots_timeout_ms = {0}")]
    Timeout(u64),
    /// Its answer could not be planned in time (a root whose directory
    /// does not answer).
    #[error("its roots could not be resolved within limits.roots_timeout_ms = {0}")]
    PlanTimeout(u64),
    /// It closed its side.
    #[error("the host closed its side")]
    HostClosed,
}

/// The roots in a `roots/list` result, for host roots with `access`; the
/// JSON error when it is not JSON.
pub fn parse(result: &str, access: Access) -> Result<Vec<RootInput>, serde_json::Error> {
    let v: Value = serde_json::from_str(result)?;
    let mut inputs = Vec::new();
    for r in v
        .get("roots")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default()
    {
        match r.get("uri").and_then(Value::as_str) {
            Some(uri) => inputs.push(RootInput::host(
                uri,
                r.get("name").and_then(Value::as_str).map(str::to_string),
                access,
            )),
            None => tracing::warn!("host root without a uri: ignored"),
        }
    }
    Ok(inputs)
}

impl Session {
    /// Ask the host for its roots and hold host traffic until they are
    /// applied (or the timeout passes).
    pub(super) fn await_host_roots(&mut self, now: Instant) {
        if !(self.handshake.host_has_roots && self.inputs.accepts_host_roots()) {
            return;
        }
        let timeout = Duration::from_millis(self.inputs.policy.raw.limits.roots_timeout_ms);
        self.exchange.awaiting = Some(now + timeout);
        if self.exchange.asked.is_some() && !self.exchange.late {
            self.exchange.again = true;
            return;
        }
        self.request_host_roots();
    }

    fn request_host_roots(&mut self) {
        // Only the newest question is answered.
        self.ledger.forget_roots_lists();
        self.exchange.count += 1;
        self.exchange.asked = Some(self.exchange.count);
        self.exchange.late = false;
        let id = self.ledger.ask(ToHost::RootsList(self.exchange.count));
        self.send_host(message::request(&id.to_string(), "roots/list", None));
    }

    /// The host answered the `n`th `roots/list`: with a result, or
    /// `Err(why)` (an error, or an answer rootfence cannot read).
    pub(super) fn on_host_roots(
        &mut self,
        n: u64,
        answer: Result<&str, RootsUnknown>,
        now: Instant,
    ) {
        if self.exchange.asked != Some(n) {
            return;
        }
        self.exchange.asked = None;
        self.exchange.late = false;
        let access = self.inputs.host_access();
        let roots = answer.and_then(|r| {
            parse(r, access).map_err(|e| {
                tracing::debug!("unreadable roots/list result: {e}");
                RootsUnknown::Unreadable
            })
        });
        match roots {
            Ok(roots) => self.inputs.set_host_roots(roots),
            Err(why) => self.drop_host_roots(why),
        }
        let waiting = if std::mem::take(&mut self.exchange.again) {
            // Another change came in meanwhile: ask again (host traffic
            // stays held); this answer applies meanwhile, so a root it
            // revokes is revoked now.
            self.request_host_roots();
            true
        } else {
            // Host traffic stays held until the answer's plan is the
            // target ([`Session::host_roots_applied`]).
            self.exchange.awaiting.is_some()
        };
        if waiting {
            // The host is waiting: no debounce.
            self.recompute(Plan::Reported);
        } else {
            self.schedule_recompute(now);
        }
    }

    /// The host's roots cannot be known: keep only the static ones.
    pub(super) fn drop_host_roots(&mut self, why: RootsUnknown) {
        tracing::warn!(
            "the host's roots are unknown ({why}): the server keeps only the roots of the command line and the policy until the host answers roots/list"
        );
        self.inputs.set_host_roots(Vec::new());
    }

    /// The host did not answer in time, or its answer's plan did not come
    /// in time (a root whose directory does not answer): its roots are
    /// dropped (fail closed), host traffic is released, and a late answer
    /// still applies.
    pub(super) fn roots_timer(&mut self, now: Instant) {
        if self.exchange.awaiting.is_some_and(|d| d <= now) {
            let timeout = self.inputs.policy.raw.limits.roots_timeout_ms;
            let why = if self.question_out() {
                RootsUnknown::Timeout(timeout)
            } else {
                RootsUnknown::PlanTimeout(timeout)
            };
            self.give_up_host_roots(why);
        }
    }

    /// Whether a question to the host about its roots is out (not given
    /// up).
    fn question_out(&self) -> bool {
        self.exchange.asked.is_some() && !self.exchange.late
    }

    /// A plan became the target: when it holds the host's latest answer
    /// (no question is out), host traffic held for it is released.
    pub(super) fn host_roots_applied(&mut self) {
        if !self.question_out() {
            self.exchange.awaiting = None;
        }
    }

    /// The host gave its roots where it waits for what they lead to (a
    /// stateless retry): its traffic is held until they are the target, or
    /// until `limits.roots_timeout_ms` passes.
    pub(super) fn hold_for_host_roots(&mut self, now: Instant) {
        let timeout = Duration::from_millis(self.inputs.policy.raw.limits.roots_timeout_ms);
        self.exchange.awaiting.get_or_insert(now + timeout);
    }

    /// Stop waiting for the host's answer to `roots/list` (if waiting):
    /// its roots are dropped (fail closed), host traffic is released, and
    /// a late answer still applies.
    pub(super) fn give_up_host_roots(&mut self, why: RootsUnknown) {
        if self.exchange.awaiting.is_none() {
            return;
        }
        self.exchange.awaiting = None;
        self.exchange.again = false;
        self.exchange.late = true;
        self.drop_host_roots(why);
        // Host traffic goes on under the plan without them, not before.
        self.recompute(Plan::Held);
    }

    /// Whether the exchange is idle (nothing held, no question but a late
    /// one).
    /// Whether the host was ever asked for its roots.
    pub(super) fn host_roots_asked_ever(&self) -> bool {
        self.exchange.count > 0
    }

    pub(super) fn exchange_idle(&self) -> bool {
        (self.exchange.asked.is_none() || self.exchange.late)
            && !self.exchange.again
            && self.exchange.awaiting.is_none()
    }
}
