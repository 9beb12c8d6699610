//! The id ledger: every request in flight, in every direction, and who
//! answers it.
//!
//! - **Host requests** ([`HostRequest`]), keyed by their canonical id: held
//!   in the queue, or sent to one generation. Sent under the host's own id
//!   (the line is forwarded untouched), or, when rootfence sends it on the
//!   host's behalf under an id of its own (an id that would collide, a
//!   re-sent `initialize`), under that id: the generation's answer is then
//!   mapped back to the host's id. Either way the answer is taken only from
//!   the generation the request was sent to.
//! - **rootfence's requests to a generation** ([`Own`]): the replayed
//!   handshake and list comparisons, and requests on a host request's
//!   behalf. Ids `"rootfence-N"` from one counter, never equal to a host id
//!   in flight.
//!   This is also the shape of a request rootfence sends again for the host
//!   (a stateless revision's re-sent request after an input round): an
//!   [`Own::OnBehalf`] entry under a fresh id, the host request
//!   [`HostState::Sent`] with that `wire` id, the final answer mapped back.
//! - **Requests to the host** ([`ToHost`]): rootfence's `roots/list` and
//!   the servers' requests, renumbered from one counter, so they never
//!   collide, across generations too, and a server can never answer a
//!   request rootfence sent to the host.
//!
//! # Id equality
//!
//! Ids are compared as JSON values: `"a"` and `"\u0061"` are one id, and so
//! are the integers `0` and `-0`. A request whose id equals one in flight
//! is refused as a duplicate (never silently lost). Only strings and
//! integers are ids; a number written with a fraction or an exponent is
//! the integer it equals (`5.0` is `5`, as Python and JavaScript hosts
//! read it), and any other number is refused as an invalid id by the
//! envelope check (`message::parse`).

use std::borrow::{Borrow, Cow};
use std::collections::HashMap;
use std::time::Instant;

use serde_json::Value;

use super::batch::BatchId;
use super::io::GenId;
use crate::proxy::guard::{AnswerCheck, Revision};

/// Longest server request id, or progress token, rootfence keeps while the
/// host answers: a longer one is refused (a server could otherwise make
/// rootfence hold its memory for it).
pub const MAX_ID_BYTES: usize = 256;

/// Most server requests waiting for the host's answer at once; past it, a
/// server's request is refused.
pub const MAX_ASKED: usize = 1024;

/// A request id in canonical form: ids equal as JSON values have equal
/// keys.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct IdKey(String);

impl Borrow<str> for IdKey {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl IdKey {
    /// The canonical text of a raw JSON id (see
    /// [`message::valid_id_key`](crate::proxy::message::valid_id_key)),
    /// without copying when it is already canonical (every plain integer
    /// but `-0`, every string without escapes). Text that is not an id
    /// stays as it is.
    pub fn canonical(raw: &str) -> Cow<'_, str> {
        crate::proxy::message::valid_id_key(raw).unwrap_or(Cow::Borrowed(raw))
    }

    /// The key of a raw JSON id.
    pub fn of(raw: &str) -> IdKey {
        IdKey(IdKey::canonical(raw).into_owned())
    }

    /// The canonical text (valid JSON).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// What rootfence needs to remember of a host request's method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// `initialize`: its answer is the server's handshake.
    Initialize,
    /// `tools/list`, `prompts/list` or `resources/list`; `paged` when it
    /// asked for a later page (only first pages are compared).
    List {
        /// The method.
        method: &'static str,
        /// Asked with a cursor.
        paged: bool,
    },
    /// `server/discover` (2026-07-28): its result's `supportedVersions`
    /// are filtered to the revisions the guard knows.
    Discover,
    /// Anything else.
    Other,
}

/// What the guard needs to judge an `input_required` result to a host's
/// `tools/call`, `prompts/get` or `resources/read` (see
/// `guard::stateless`).
#[derive(Debug, Clone)]
pub struct Judged {
    /// The method (one of `guard::stateless::INPUT_REQUIRED_METHODS`).
    pub method: &'static str,
    /// The params as sent to the server (raw JSON): the base of
    /// rootfence's own retries. Kept for every request of the stateless
    /// era, and for those of the handshake era up to
    /// [`KEEP_PARAMS`](crate::proxy::guard::stateless::KEEP_PARAMS).
    pub params: Option<Box<str>>,
    /// The request's revision: its `_meta` protocol version, or the
    /// negotiated one.
    pub revision: Revision,
    /// Whether the request is of the stateless era.
    pub stateless: bool,
    /// The host's client capabilities for this request, when its `_meta`
    /// declares them (else those of the host's `initialize`).
    pub host_caps: Option<Value>,
    /// How many times in a row rootfence retried it itself.
    pub own_rounds: u32,
    /// A host retry that brought the host's roots: its roots answers were
    /// filled in before those roots were planned, and are filled again as
    /// it is sent.
    pub refill: Option<Refill>,
}

/// The roots answers of a host retry, filled in with the roots enforced
/// when it came (see [`Judged::refill`]).
#[derive(Debug, Clone)]
pub struct Refill {
    /// The keys of its `inputResponses` that answer a roots question.
    pub keys: Vec<String>,
    /// What they were filled with.
    pub filled: Value,
}

/// Where a host request is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostState {
    /// Held until a generation may take it.
    Queued,
    /// Sent to generation `generation`; `wire` is rootfence's own id when it was
    /// sent on the host's behalf under one (else the host's id).
    Sent {
        /// The generation handling it.
        generation: GenId,
        /// rootfence's id for it, if not the host's.
        wire: Option<IdKey>,
    },
}

/// A request from the host, until it is answered.
#[derive(Debug)]
pub struct HostRequest {
    /// The id as the host wrote it, when that differs from its key.
    raw: Option<Box<str>>,
    /// What it asks.
    pub method: Method,
    /// The batch it belongs to.
    pub batch: Option<BatchId>,
    /// Held or sent.
    pub state: HostState,
    /// For `initialize`: when it is answered with an error if the server
    /// has not answered.
    pub deadline: Option<Instant>,
    /// For a request whose result may be `input_required`: how to judge
    /// it.
    pub judged: Option<Box<Judged>>,
    /// Its `_meta.progressToken`.
    token: Option<IdKey>,
}

impl HostRequest {
    /// The id as the host wrote it.
    pub fn id<'a>(&'a self, key: &'a IdKey) -> &'a str {
        self.raw.as_deref().unwrap_or(key.as_str())
    }

    /// The generation handling it, if sent.
    pub fn generation(&self) -> Option<GenId> {
        match self.state {
            HostState::Sent { generation, .. } => Some(generation),
            HostState::Queued => None,
        }
    }
}

/// A request rootfence sent to a generation itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Own {
    /// The replayed `initialize` of a rebuilt generation.
    Initialize,
    /// Replayed state (`logging/setLevel`, `resources/subscribe`): the
    /// answer is dropped.
    Replay,
    /// A list compared with the one the host saw.
    List(&'static str),
    /// Sent on behalf of this host request: the answer goes to the host
    /// under the host's id.
    OnBehalf(IdKey),
}

/// A request to the host.
#[derive(Debug)]
pub enum ToHost {
    /// rootfence's own `roots/list`, the `n`th it asked.
    RootsList(u64),
    /// A server's request.
    Server {
        /// The generation that asked.
        generation: GenId,
        /// Its id as the server wrote it.
        id_raw: String,
        /// How the guard checks the host's answer (elicitation forms).
        check: Option<AnswerCheck>,
        /// The server's `_meta.progressToken`, as written, when the host
        /// was given this request's id as the token instead.
        token: Option<String>,
    },
}

impl ToHost {
    /// The generation whose request it is.
    pub fn generation(&self) -> Option<GenId> {
        match self {
            ToHost::Server { generation, .. } => Some(*generation),
            ToHost::RootsList(_) => None,
        }
    }
}

/// Every request in flight.
#[derive(Debug)]
pub struct Ledger {
    host: HashMap<IdKey, HostRequest>,
    /// The progress tokens of host requests in flight, and their
    /// requests: a server's progress is relayed only for these.
    host_tokens: HashMap<IdKey, IdKey>,
    /// How many host requests have a deadline (only `initialize` has one):
    /// with none, the deadline look-ups cost nothing per message.
    timed: usize,
    own: HashMap<GenId, HashMap<IdKey, Own>>,
    to_host: HashMap<u64, ToHost>,
    next_to_host: u64,
    next_own: u64,
}

impl Default for Ledger {
    fn default() -> Self {
        Ledger {
            host: HashMap::new(),
            host_tokens: HashMap::new(),
            timed: 0,
            own: HashMap::new(),
            to_host: HashMap::new(),
            next_to_host: 1,
            next_own: 1,
        }
    }
}

impl Ledger {
    // ---------------------------------------------------------------
    // Host requests

    /// Whether a host request with this (canonical) id is in flight.
    pub fn host_in_flight(&self, key: &str) -> bool {
        self.host.contains_key(key)
    }

    /// Record a host request, held.
    pub fn host_insert(
        &mut self,
        key: IdKey,
        raw: &str,
        method: Method,
        batch: Option<BatchId>,
        deadline: Option<Instant>,
    ) {
        let raw = (raw != key.as_str()).then(|| raw.into());
        self.timed += usize::from(deadline.is_some());
        let old = self.host.insert(
            key,
            HostRequest {
                raw,
                method,
                batch,
                state: HostState::Queued,
                deadline,
                judged: None,
                token: None,
            },
        );
        if old.is_some_and(|o| o.deadline.is_some()) {
            self.timed -= 1;
        }
    }

    /// A host request in flight.
    pub fn host(&self, key: &str) -> Option<&HostRequest> {
        self.host.get(key)
    }

    /// A host request in flight, to update.
    pub fn host_mut(&mut self, key: &str) -> Option<&mut HostRequest> {
        self.host.get_mut(key)
    }

    /// Take a host request out (it is being answered).
    pub fn host_remove(&mut self, key: &str) -> Option<(IdKey, HostRequest)> {
        let removed = self.host.remove_entry(key);
        if let Some((_, r)) = &removed {
            if r.deadline.is_some() {
                self.timed -= 1;
            }
            if let Some(t) = &r.token {
                self.host_tokens.remove(t.as_str());
            }
        }
        removed
    }

    /// Whether a host request in flight has this progress token.
    pub fn host_token_in_flight(&self, token: &IdKey) -> bool {
        self.host_tokens.contains_key(token.as_str())
    }

    /// Host request `key` (recorded) has progress token `token`.
    pub fn host_token_insert(&mut self, token: IdKey, key: IdKey) {
        if let Some(r) = self.host.get_mut(key.as_str()) {
            r.token = Some(token.clone());
            self.host_tokens.insert(token, key);
        }
    }

    /// The generation handling the host request whose progress token is
    /// `token` (raw JSON).
    pub fn host_token_generation(&self, token: &str) -> Option<GenId> {
        let key = self.host_tokens.get(IdKey::canonical(token).as_ref())?;
        self.host.get(key.as_str())?.generation()
    }

    /// The keys of the host requests sent to `g`.
    pub fn sent_to(&self, g: GenId) -> Vec<IdKey> {
        let mut v: Vec<IdKey> = self
            .host
            .iter()
            .filter(|(_, r)| r.generation() == Some(g))
            .map(|(k, _)| k.clone())
            .collect();
        v.sort();
        v
    }

    /// Whether any host request is sent to `g`.
    pub fn any_sent_to(&self, g: GenId) -> bool {
        self.host.values().any(|r| r.generation() == Some(g))
    }

    /// Whether no host request is in flight.
    pub fn host_none(&self) -> bool {
        self.host.is_empty()
    }

    /// Every host request's key, sorted.
    pub fn host_keys(&self) -> Vec<IdKey> {
        let mut v: Vec<IdKey> = self.host.keys().cloned().collect();
        v.sort();
        v
    }

    /// The earliest deadline of a host request.
    pub fn next_deadline(&self) -> Option<Instant> {
        if self.timed == 0 {
            return None;
        }
        self.host.values().filter_map(|r| r.deadline).min()
    }

    /// The host requests whose deadline is due at `now`.
    pub fn due(&self, now: Instant) -> Vec<IdKey> {
        if self.timed == 0 {
            return Vec::new();
        }
        let mut v: Vec<IdKey> = self
            .host
            .iter()
            .filter(|(_, r)| r.deadline.is_some_and(|d| d <= now))
            .map(|(k, _)| k.clone())
            .collect();
        v.sort();
        v
    }

    // ---------------------------------------------------------------
    // rootfence's requests to generations

    /// A fresh id for a request rootfence sends to `g` as `kind`: never the
    /// id of a host request in flight. Returns the raw JSON id.
    pub fn own_send(&mut self, g: GenId, kind: Own) -> String {
        loop {
            let raw = format!("\"rootfence-{}\"", self.next_own);
            self.next_own += 1;
            if self.host.contains_key(raw.as_str()) {
                continue;
            }
            self.own
                .entry(g)
                .or_default()
                .insert(IdKey(raw.clone()), kind);
            return raw;
        }
    }

    /// Whether `g` has requests from rootfence in flight with this id.
    pub fn own_has(&self, g: GenId, key: &str) -> bool {
        self.own.get(&g).is_some_and(|m| m.contains_key(key))
    }

    /// The request rootfence sent to `g` under this id, if any: taken out
    /// (it is being answered).
    pub fn own_take(&mut self, g: GenId, key: &str) -> Option<Own> {
        let m = self.own.get_mut(&g)?;
        if m.is_empty() {
            return None;
        }
        let own = m.remove(key);
        if m.is_empty() {
            self.own.remove(&g);
        }
        own
    }

    /// Forget rootfence's request on behalf of host request `host` sent to
    /// `g` under `wire` (the host request was answered otherwise).
    pub fn own_forget(&mut self, g: GenId, wire: &str) {
        if let Some(m) = self.own.get_mut(&g) {
            m.remove(wire);
            if m.is_empty() {
                self.own.remove(&g);
            }
        }
    }

    // ---------------------------------------------------------------
    // Requests to the host

    /// Record a request to the host; returns its id (the next of the one
    /// counter).
    pub fn ask(&mut self, entry: ToHost) -> u64 {
        let id = self.next_to_host;
        self.next_to_host += 1;
        self.to_host.insert(id, entry);
        id
    }

    /// The id the next request to the host will have.
    pub fn next_asked(&self) -> u64 {
        self.next_to_host
    }

    /// The request to the host with this (raw JSON) id, taken out.
    pub fn asked_take(&mut self, raw: &str) -> Option<ToHost> {
        let id: u64 = IdKey::canonical(raw).parse().ok()?;
        self.to_host.remove(&id)
    }

    /// The request to the host with this id, left in place.
    pub fn asked_get(&self, raw: &str) -> Option<&ToHost> {
        let id: u64 = IdKey::canonical(raw).parse().ok()?;
        self.to_host.get(&id)
    }

    /// Why a server request with id `raw` and `params` may not wait for
    /// the host's answer: its id or progress token is too long, or too
    /// many wait already. `None` when it may.
    pub fn may_ask(
        &self,
        raw: &str,
        params: Option<crate::proxy::message::Raw<'_>>,
    ) -> Option<String> {
        if raw.len() > MAX_ID_BYTES {
            return Some(format!(
                "request ids longer than {MAX_ID_BYTES} bytes are not accepted"
            ));
        }
        let token_len = params
            .filter(|p| p.bytes().len() > MAX_ID_BYTES)
            .and_then(|p| crate::proxy::message::member(p.get(), "_meta"))
            .and_then(|m| crate::proxy::message::member(m, "progressToken"))
            .map_or(0, str::len);
        if token_len > MAX_ID_BYTES {
            return Some(format!(
                "progress tokens longer than {MAX_ID_BYTES} bytes are not accepted"
            ));
        }
        if self.to_host.len() >= MAX_ASKED {
            return Some(format!(
                "at most {MAX_ASKED} requests may wait for the host's answer at once"
            ));
        }
        None
    }

    /// The host-facing id of `g`'s request `server_id` (canonical).
    pub fn asked_find(&self, g: GenId, server_id: &str) -> Option<u64> {
        self.to_host.iter().find_map(|(id, t)| match t {
            ToHost::Server {
                generation, id_raw, ..
            } if *generation == g && IdKey::canonical(id_raw) == server_id => Some(*id),
            _ => None,
        })
    }

    /// Remove the request to the host with this id.
    pub fn asked_remove(&mut self, id: u64) {
        self.to_host.remove(&id);
    }

    /// Forget rootfence's `roots/list` requests in flight (a newer one
    /// is asked).
    pub fn forget_roots_lists(&mut self) {
        self.to_host
            .retain(|_, t| !matches!(t, ToHost::RootsList(_)));
    }

    /// Whether a host request of method `initialize` is sent to a
    /// generation.
    pub fn initialize_sent(&self) -> bool {
        self.host
            .values()
            .any(|r| r.method == Method::Initialize && r.generation().is_some())
    }

    // ---------------------------------------------------------------
    // Generations

    /// Forget what rootfence and the host owe generation `g` (it is
    /// stopping): its requests to the host (the host's later answers are
    /// dropped) and rootfence's own requests to it, except, with
    /// `keep_on_behalf`, those sent on a host request's behalf (it may still
    /// answer them). Host requests sent to it are left to the caller.
    pub fn forget_gen(&mut self, g: GenId, keep_on_behalf: bool) {
        if keep_on_behalf {
            if let Some(m) = self.own.get_mut(&g) {
                m.retain(|_, o| matches!(o, Own::OnBehalf(_)));
                if m.is_empty() {
                    self.own.remove(&g);
                }
            }
        } else {
            self.own.remove(&g);
        }
        self.to_host.retain(|_, t| t.generation() != Some(g));
    }

    /// Whether nothing at all is in flight (rootfence's own `roots/list`
    /// aside, when `roots` is true).
    pub fn is_empty(&self, roots: bool) -> bool {
        self.host.is_empty()
            && self.own.is_empty()
            && self
                .to_host
                .values()
                .all(|t| roots && matches!(t, ToHost::RootsList(_)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_equal_as_json_values_have_one_key() {
        assert_eq!(IdKey::of("0"), IdKey::of("-0"));
        assert_eq!(IdKey::of("0").as_str(), "0");
        assert_eq!(IdKey::of(r#""\u0061""#), IdKey::of(r#""a""#));
        assert_ne!(IdKey::of("1"), IdKey::of(r#""1""#));
        assert_ne!(IdKey::of("-1"), IdKey::of("1"));
        assert_eq!(IdKey::of("-17").as_str(), "-17");
        // Plain ids are not copied to be compared.
        assert!(matches!(IdKey::canonical("42"), Cow::Borrowed("42")));
        assert!(matches!(IdKey::canonical(r#""x""#), Cow::Borrowed(_)));
        // Beyond 64 bits: compared as written (JSON has no other spelling
        // of an integer).
        assert_eq!(
            IdKey::of("123456789012345678901234567890").as_str(),
            "123456789012345678901234567890"
        );
        // Integral numbers written otherwise are that integer.
        assert_eq!(IdKey::of("5.0"), IdKey::of("5"));
        assert_eq!(IdKey::of("50e-1"), IdKey::of("5"));
        assert_eq!(IdKey::of("-0.0"), IdKey::of("0"));
    }

    #[test]
    fn own_ids_never_equal_a_host_id_in_flight() {
        let mut l = Ledger::default();
        l.host_insert(
            IdKey::of("\"rootfence-1\""),
            "\"rootfence-1\"",
            Method::Other,
            None,
            None,
        );
        let raw = l.own_send(1, Own::Replay);
        assert_eq!(raw, "\"rootfence-2\"");
        assert!(l.own_has(1, &raw));
        assert_eq!(l.own_take(1, &raw), Some(Own::Replay));
        assert_eq!(l.own_take(1, &raw), None);
        assert!(!l.is_empty(false));
        l.host_remove("\"rootfence-1\"");
        assert!(l.is_empty(false));
    }

    #[test]
    fn ids_to_the_host_come_from_one_counter() {
        let mut l = Ledger::default();
        let a = l.ask(ToHost::RootsList(1));
        let b = l.ask(ToHost::Server {
            generation: 1,
            id_raw: "1".into(),
            check: None,
            token: None,
        });
        let c = l.ask(ToHost::Server {
            generation: 2,
            id_raw: "1".into(),
            check: None,
            token: None,
        });
        assert_eq!((a, b, c), (1, 2, 3));
        assert_eq!(l.asked_find(2, "1"), Some(3));
        l.forget_gen(2, false);
        assert!(l.asked_take("3").is_none());
        assert!(matches!(
            l.asked_take("2"),
            Some(ToHost::Server { generation: 1, .. })
        ));
        assert!(l.is_empty(true));
        assert!(!l.is_empty(false));
    }
}
