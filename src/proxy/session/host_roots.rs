//! Asking the host for its roots.
//!
//! rootfence asks (`roots/list`, its own id) after the host's
//! `notifications/initialized` and after each `notifications/roots/list_changed`,
//! when the host declared roots and the policy takes them. Host traffic is
//! held from then until the answer has been turned into the new target and
//! the fleet has settled on it, or until `limits.initialize_timeout_ms`
//! passes (then the roots known stay). Changes announced while a request
//! is in flight are folded into one more request; each answer applies as
//! it arrives (a root it revokes is revoked at once), and the newest
//! decides.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::Session;
use super::ledger::ToHost;
use crate::proxy::message;
use crate::roots::{Access, RootInput};

/// The state of the exchange.
#[derive(Debug, Default)]
pub struct Exchange {
    in_flight: bool,
    again: bool,
    /// Host traffic is held until the answer, or until this instant.
    pub awaiting: Option<Instant>,
}

/// The roots in a `roots/list` result, for host roots with `access`.
pub fn parse(result: &str, access: Access) -> Result<Vec<RootInput>, String> {
    let v: Value = serde_json::from_str(result).map_err(|e| e.to_string())?;
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
        let timeout = Duration::from_millis(self.inputs.policy.raw.limits.initialize_timeout_ms);
        self.exchange.awaiting = Some(now + timeout);
        if self.exchange.in_flight {
            self.exchange.again = true;
            return;
        }
        self.request_host_roots();
    }

    fn request_host_roots(&mut self) {
        self.exchange.in_flight = true;
        let id = self.ledger.ask(ToHost::RootsList);
        self.send_host(message::request(&id.to_string(), "roots/list", None));
    }

    /// The host answered `roots/list` (`None`: with an error).
    pub(super) fn on_host_roots(&mut self, result: Option<&str>, now: Instant) {
        self.exchange.in_flight = false;
        match result.map(|r| parse(r, self.inputs.host_access())) {
            Some(Ok(roots)) => self.inputs.set_host_roots(roots),
            Some(Err(e)) => tracing::warn!(
                "host answered roots/list with something unreadable ({e}); keeping the previous host roots"
            ),
            None => tracing::warn!(
                "host answered roots/list with an error; keeping the previous host roots"
            ),
        }
        let waiting = if std::mem::take(&mut self.exchange.again) {
            // Another change came in meanwhile: ask again (host traffic
            // stays held); this answer applies meanwhile, so a root it
            // revokes is revoked now.
            self.request_host_roots();
            true
        } else {
            self.exchange.awaiting.take().is_some()
        };
        if waiting {
            // The host is waiting: no debounce.
            self.recompute(true, now);
        } else {
            self.schedule_recompute(now);
        }
    }

    /// The host did not answer in time: carry on with the roots known.
    pub(super) fn roots_timer(&mut self, now: Instant) {
        if self.exchange.awaiting.is_some_and(|d| d <= now) {
            tracing::warn!(
                "the host did not answer roots/list in time; continuing with the roots known"
            );
            self.exchange.awaiting = None;
            self.exchange.again = false;
            // A late answer is dropped; the next change asks again.
            self.exchange.in_flight = false;
            self.ledger.forget_roots_lists();
        }
    }

    /// Whether the exchange is idle (nothing asked, nothing held).
    pub(super) fn exchange_idle(&self) -> bool {
        !self.exchange.in_flight && !self.exchange.again && self.exchange.awaiting.is_none()
    }
}
