//! The host's side: what rootfence does with each line the host writes.
//!
//! Requests are recorded in the ledger and sent to the serving generation,
//! or held (in order, with the notifications between them) while there is
//! none that serves the target, or while the host's roots are being asked
//! for. The host's `initialize` is sent with the capabilities the policy
//! allows; its `notifications/initialized`, `roots/list_changed`,
//! `cancelled` and `progress` are acted on here; its answers to server
//! requests go back to the generation that asked, under the server's id.

use std::collections::VecDeque;

use serde_json::Value;
use serde_json::value::RawValue;

use super::Session;
use super::batch::{self, BatchId};
use super::handshake::list_method;
use super::host_roots::RootsUnknown;
use super::io::Frame;
use super::io::{Action, GenId, Unrelayable};
use super::ledger::{HostState, IdKey, Method, Own, ToHost};
use super::stateless::Prepared;
use crate::proxy::canonical::Why;
use crate::proxy::message::{self, Ident, Invalid, Kind, Line, code};

/// A host message held until a generation may take it.
#[derive(Debug)]
enum Held {
    /// A request (its record is in the ledger). The line of a held
    /// `initialize` is not used: it is built from the recorded params.
    Request(IdKey, Vec<u8>),
    /// A notification.
    Notification(Vec<u8>),
}

/// The host's messages held, in order, until a generation serving the
/// target may take them.
#[derive(Debug, Default)]
pub struct HostQueue(VecDeque<Held>);

impl HostQueue {
    fn hold(&mut self, h: Held) {
        self.0.push_back(h);
    }

    /// Put back first what could not be sent.
    fn hold_first(&mut self, h: Held) {
        self.0.push_front(h);
    }

    fn next(&mut self) -> Option<Held> {
        self.0.pop_front()
    }

    /// Forget the held request `key` (cancelled).
    fn forget(&mut self, key: &str) {
        self.0
            .retain(|h| !matches!(h, Held::Request(k, _) if k.as_str() == key));
    }

    /// Hold the host request `key` again, first: its generation was
    /// stopped before answering, and it can be sent again with no effect
    /// lost (the host's `initialize`, rebuilt from its recorded params).
    pub fn requeue(&mut self, key: IdKey) {
        self.0.push_front(Held::Request(key, Vec::new()));
    }

    /// Forget everything held (the session is ending).
    pub fn clear(&mut self) {
        self.0.clear();
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The `_meta.progressToken` of a request's params, as a key (a string or
/// an integer; anything else is no token).
fn progress_token(
    params: Option<message::Raw<'_>>,
    guarded: Option<message::Guarded<'_>>,
) -> Option<IdKey> {
    let meta = match guarded {
        Some(g) => g.meta?.get(),
        None => message::member(params?.get(), "_meta")?,
    };
    let token = message::member(meta, "progressToken")?;
    message::valid_id_key(token).map(|k| IdKey::of(&k))
}

/// The message of an error for a host message rootfence does not relay.
fn why_text(code: i64, why: &Unrelayable) -> String {
    match code {
        code::PARSE_ERROR => format!("Parse error: {why}"),
        _ => format!("Invalid Request: {why}"),
    }
}

impl Session {
    /// One frame from the host.
    pub(super) fn on_host_frame(&mut self, frame: Frame, now: std::time::Instant) {
        match frame {
            Frame::Line(line) => self.on_host_line(line, None, now),
            Frame::TooLong { len, ident } => {
                let max = self.inputs.policy.raw.limits.max_message_bytes;
                let why = Unrelayable::TooLong { len, max };
                self.on_host_unrelayable(ident, why, code::INVALID_REQUEST, None, now);
            }
        }
    }

    /// Send a line to the host.
    pub(super) fn send_host(&mut self, line: Vec<u8>) {
        self.out.push(Action::ToHost(line));
    }

    /// Send a reply to the host, or add it to its batch.
    pub(super) fn reply_host(&mut self, reply: Vec<u8>, batch: Option<BatchId>) {
        match batch {
            Some(b) => {
                if let Some(whole) = self.batches.reply(b, reply) {
                    self.send_host(whole);
                }
            }
            None => self.send_host(reply),
        }
    }

    /// Answer host request `key` with an error (and forget it).
    pub(super) fn answer_error(&mut self, key: &IdKey, code: i64, why: &str) {
        self.answer_with(key.as_str(), |id| {
            message::error_response(Some(id), code, why)
        });
    }

    /// Answer host request `key` with the reply `make` builds for its id,
    /// forgetting the request (and the id it went to a server under).
    pub(super) fn answer_with(&mut self, key: &str, make: impl FnOnce(&str) -> Vec<u8>) {
        let Some((key, r)) = self.ledger.host_remove(key) else {
            return;
        };
        if let HostState::Sent {
            generation,
            wire: Some(w),
        } = &r.state
        {
            self.ledger.own_forget(*generation, w.as_str());
        }
        let reply = make(r.id(&key));
        self.reply_host(reply, r.batch);
    }

    /// A host line rootfence does not relay (over the size limit, or
    /// unreadable: `why`): its sender is answered by the id found, if any.
    /// A request gets an error; an answer to a server's request is
    /// replaced by an error to that server (an answer to rootfence's own
    /// `roots/list` counts as no answer); a notification is dropped.
    fn on_host_unrelayable(
        &mut self,
        ident: Ident,
        why: Unrelayable,
        code: i64,
        batch: Option<BatchId>,
        now: std::time::Instant,
    ) {
        tracing::warn!(
            method = ident.method.as_deref().unwrap_or("?"),
            id = ident.id.as_deref().unwrap_or("?"),
            "host message not relayed: {why}"
        );
        if ident.answer {
            match ident
                .id
                .as_deref()
                .and_then(|id| self.ledger.asked_take(id))
            {
                Some(ToHost::RootsList(seq)) => {
                    self.on_host_roots(seq, Err(RootsUnknown::NotRelayed(why)), now);
                }
                Some(ToHost::Server {
                    generation, id_raw, ..
                }) if self
                    .fleet
                    .gens
                    .get(&generation)
                    .is_some_and(|g| !g.phase.stopping()) =>
                {
                    let reply = message::error_response(
                        Some(&id_raw),
                        code::INTERNAL_ERROR,
                        &format!("rootfence did not relay the host's answer: {why}"),
                    );
                    self.out.push(Action::ToServer(generation, reply));
                }
                _ => {}
            }
            return;
        }
        if !ident.replied() {
            // A notification: nothing to answer.
            return;
        }
        let reply = message::error_response(ident.id.as_deref(), code, &why_text(code, &why));
        self.reply_host(reply, batch);
    }

    fn on_host_line(&mut self, bytes: Vec<u8>, batch: Option<BatchId>, now: std::time::Instant) {
        if message::is_batch(&bytes) {
            if batch.is_some() {
                tracing::warn!("host sent a batch inside a batch: answered as invalid");
                let reply = message::error_response(
                    None,
                    code::INVALID_REQUEST,
                    "Invalid Request: a batch member cannot be a batch",
                );
                return self.reply_host(reply, batch);
            }
            return self.on_host_batch(&bytes, now);
        }
        let line = match Line::read(bytes) {
            Ok(line) => line,
            Err(Invalid::Batch) => return,
            Err(Invalid::Unreadable(u)) => {
                let code = if u.why == Why::NotJson {
                    code::PARSE_ERROR
                } else {
                    code::INVALID_REQUEST
                };
                let why = Unrelayable::Unreadable(u.why);
                return self.on_host_unrelayable(u.ident, why, code, batch, now);
            }
            Err(Invalid::NotJsonRpc { why, id }) => {
                tracing::warn!("host sent an invalid JSON-RPC message: {why}");
                let reply = message::error_response(
                    id.as_deref(),
                    code::INVALID_REQUEST,
                    &format!("Invalid Request: {why}"),
                );
                return self.reply_host(reply, batch);
            }
        };
        if line.rewritten() {
            tracing::debug!("host line relayed in canonical form");
        }
        match line.envelope().kind {
            Kind::Response => self.on_host_response(&line, now),
            Kind::Notification => self.on_host_notification(&line, now),
            Kind::Request => self.on_host_request(line, batch, now),
        }
    }

    fn on_host_request(&mut self, line: Line, batch: Option<BatchId>, now: std::time::Instant) {
        let env = line.envelope();
        // Checked when read: requests have ids.
        let Some(id) = env.id else { return };
        let key = IdKey::canonical(id.get());
        if self.ledger.host_in_flight(&key) {
            tracing::warn!(id = %id.get(), "host reused the id of a request still in flight");
            let reply = message::error_response(
                Some(id.get()),
                code::INVALID_REQUEST,
                "Invalid Request: id already in use by a request in flight",
            );
            return self.reply_host(reply, batch);
        }
        let method = env.method.as_deref().unwrap_or_default();
        if self.fleet.ending().is_some() || self.target.suspended.is_some() {
            let why = self
                .target
                .suspended
                .clone()
                .unwrap_or_else(|| "the session is ending".into());
            let reply = message::error_response(Some(id.get()), code::SERVER_GONE, &why);
            return self.reply_host(reply, batch);
        }
        let token = progress_token(env.params, env.params_guarded);
        if let Some(t) = &token
            && self.ledger.host_token_in_flight(t)
        {
            tracing::warn!(id = %id.get(), "host reused the progress token of a request still in flight");
            let reply = message::error_response(
                Some(id.get()),
                code::INVALID_REQUEST,
                "Invalid Request: _meta.progressToken already in use by a request in flight",
            );
            return self.reply_host(reply, batch);
        }
        // The guard's look: protocol version, capabilities, retries.
        let (edited, judged) =
            match self.prepare_request(id.get(), method, env.params, env.params_guarded, now) {
                Prepared::Answered(reply) => return self.reply_host(reply, batch),
                Prepared::Send { params, judged } => (params, judged),
            };
        // Read only by the rare methods that record their params.
        let params_now = || edited.as_deref().or(env.params.map(|p| p.get()));
        let out_line = edited.as_ref().and_then(|p| {
            let range = message::span_in(line.bytes(), env.params?)?;
            Some(message::splice(line.bytes(), range, p.as_bytes()))
        });
        // Read only for list methods: a `tools/call`'s params (megabytes,
        // maybe) are not searched.
        let paged = || env.params.is_some_and(|p| p.get().contains("\"cursor\""));
        let (kind, deadline) = match self.host_method(id.get(), method, params_now, paged, now) {
            Ok(k) => k,
            Err(reply) => return self.reply_host(reply, batch),
        };
        let id_raw = id.get().to_string();
        let key = IdKey::of(&key);
        drop(env);
        let out_line = out_line.unwrap_or_else(|| line.into_bytes());
        self.ledger
            .host_insert(key.clone(), &id_raw, kind, batch, deadline);
        if let Some(r) = self.ledger.host_mut(key.as_str()) {
            r.judged = judged;
        }
        if let Some(t) = token {
            self.ledger.host_token_insert(t, key.clone());
        }
        // The common case, sent at once under the host's id: the line moved
        // untouched.
        let direct = self.fleet.current.filter(|g| {
            kind != Method::Initialize && !self.holding() && !self.ledger.own_has(*g, key.as_str())
        });
        if let Some(g) = direct {
            if let Some(r) = self.ledger.host_mut(key.as_str()) {
                r.state = HostState::Sent {
                    generation: g,
                    wire: None,
                };
            }
            self.out.push(Action::ToServer(g, out_line));
            return;
        }
        self.queue.hold(Held::Request(key, out_line));
        if matches!(self.fleet.phase, super::lifecycle::FleetPhase::Dormant) {
            // The first message that needs a server (`initialize`, or a
            // probe before it): launch one.
            self.wake();
            self.settle(now);
        } else {
            self.flush();
        }
    }

    /// What rootfence keeps of a host request's method (recording the
    /// handshake state it sets), and its deadline; `Err`: the reply that
    /// answers it instead (a second `initialize`, or one answered from
    /// memory).
    fn host_method<'p>(
        &mut self,
        id: &str,
        method: &str,
        params: impl Fn() -> Option<&'p str>,
        paged: impl Fn() -> bool,
        now: std::time::Instant,
    ) -> Result<(Method, Option<std::time::Instant>), Vec<u8>> {
        Ok(match method {
            "initialize" if self.handshake.host_init.is_some() => {
                return Err(message::error_response(
                    Some(id),
                    code::INVALID_REQUEST,
                    "Invalid Request: initialize was already sent in this session",
                ));
            }
            "initialize" => {
                let params = params()
                    .and_then(|p| serde_json::from_str(p).ok())
                    .unwrap_or(Value::Null);
                self.handshake.record_host_init(params);
                if let Some(result) = self.answer_from_memory(now) {
                    return Err(message::result_response(id, &result));
                }
                let timeout = std::time::Duration::from_millis(
                    self.inputs.policy.raw.limits.initialize_timeout_ms,
                );
                (Method::Initialize, Some(now + timeout))
            }
            // The host was offered logging by rootfence, not the server:
            // rootfence keeps the level for its own messages.
            "logging/setLevel"
                if self.handshake.logging_offered && !self.handshake.server_logs() =>
            {
                if !super::handshake::valid_level(params()) {
                    return Err(message::error_response(
                        Some(id),
                        code::INVALID_PARAMS,
                        "Invalid params: level must be one of debug, info, notice, warning, error, critical, alert, emergency",
                    ));
                }
                self.handshake.record_host_request(method, params());
                return Err(message::result_response(id, "{}"));
            }
            "logging/setLevel" | "resources/subscribe" | "resources/unsubscribe" => {
                self.handshake.record_host_request(method, params());
                (Method::Other, None)
            }
            "server/discover" => (Method::Discover, None),
            m => match list_method(m) {
                // Only first pages are compared across rebuilds.
                Some(list) => (
                    Method::List {
                        method: list,
                        paged: paged(),
                    },
                    None,
                ),
                None => (Method::Other, None),
            },
        })
    }

    fn on_host_batch(&mut self, line: &[u8], now: std::time::Instant) {
        if self.handshake.protocol.as_deref() != Some("2025-03-26") {
            let v = self
                .handshake
                .protocol
                .as_deref()
                .unwrap_or("not yet negotiated");
            tracing::warn!(
                "host sent a batch; batches exist only in protocol 2025-03-26 (this session: {v})"
            );
            let why = Unrelayable::Batch {
                revision: v.to_string(),
            };
            // Refused whole, but no member is swallowed: each request gets
            // its error under its id, each answer to a server's request
            // is replaced by an error to that server.
            let items: Vec<&RawValue> = serde_json::from_slice(line).unwrap_or_default();
            let mut answered = false;
            for item in items {
                let ident = crate::proxy::sniff::ident(item.get().as_bytes());
                if ident.answer {
                    self.on_host_unrelayable(ident, why.clone(), code::INVALID_REQUEST, None, now);
                } else if let (Some(id), Some(_)) = (&ident.id, &ident.method) {
                    self.send_host(message::error_response(
                        Some(id),
                        code::INVALID_REQUEST,
                        &why.to_string(),
                    ));
                    answered = true;
                }
            }
            if !answered {
                self.send_host(message::error_response(
                    None,
                    code::INVALID_REQUEST,
                    &why.to_string(),
                ));
            }
            return;
        }
        let items: Vec<&RawValue> = match serde_json::from_slice(line) {
            Ok(v) => v,
            Err(e) => {
                tracing::warn!("host sent a malformed batch: {e}");
                self.send_host(message::error_response(
                    None,
                    code::PARSE_ERROR,
                    "Parse error: malformed batch",
                ));
                return;
            }
        };
        if items.is_empty() {
            self.send_host(message::error_response(
                None,
                code::INVALID_REQUEST,
                "Invalid Request: empty batch",
            ));
            return;
        }
        let expected = items
            .iter()
            .filter(|i| batch::answered(i.get().as_bytes()))
            .count();
        let b = self.batches.open(expected);
        for item in items {
            self.on_host_line(item.get().as_bytes().to_vec(), b, now);
        }
    }

    fn on_host_notification(&mut self, line: &Line, now: std::time::Instant) {
        let env = line.envelope();
        match env.method.as_deref().unwrap_or_default() {
            "notifications/initialized" => {
                self.handshake.host_initialized = true;
                self.flush_notes();
                if let Some(g) = self.fleet.current
                    && let Some(generation) = self.fleet.gens.get_mut(&g)
                    && generation.offer.is_some()
                    && !generation.initialized
                {
                    generation.initialized = true;
                    self.out.push(Action::ToServer(g, line.bytes().to_vec()));
                }
                self.await_host_roots(now);
            }
            "notifications/roots/list_changed" => {
                // rootfence provides the server's roots; the host's change
                // is fetched, validated and turned into the new target.
                // Requests the host sends from now on are held until then.
                self.await_host_roots(now);
            }
            "notifications/cancelled" => self.on_host_cancel(line.bytes(), env.params),
            "notifications/progress" => {
                // About a server's request to the host: goes to the
                // generation that asked, with its own token; a token no
                // server request of this session was given is dropped.
                let token = message::progress_token(env.params);
                if let Some(t) = token
                    && let Some(ToHost::Server {
                        generation,
                        token: Some(orig),
                        ..
                    }) = self.ledger.asked_get(t.get())
                    && let Some(range) = message::span_in(line.bytes(), t.into())
                {
                    let generation = *generation;
                    let out = message::splice(line.bytes(), range, orig.as_bytes());
                    if self
                        .fleet
                        .gens
                        .get(&generation)
                        .is_some_and(|g| !g.phase.stopping())
                    {
                        self.out.push(Action::ToServer(generation, out));
                    }
                    return;
                }
                tracing::debug!("host progress for no server request in flight: dropped");
            }
            // A server's notification: the host does not send it.
            "notifications/elicitation/complete" => {
                tracing::debug!("host sent notifications/elicitation/complete: dropped");
            }
            _ => self.notify_server(line.bytes().to_vec()),
        }
    }

    /// The host cancels one of its requests. A cancellation that names no
    /// host request in flight is dropped: the host cannot cancel what
    /// rootfence asked a server.
    fn on_host_cancel(&mut self, line: &[u8], params: Option<message::Raw<'_>>) {
        let target = message::cancelled_id(params);
        let Some(t) = target else {
            return tracing::debug!("host cancellation without a readable requestId: dropped");
        };
        let key = IdKey::canonical(t.get());
        let state = self
            .ledger
            .host(&key)
            .map(|r| (r.state.clone(), r.method, r.batch));
        match state {
            Some((HostState::Queued, _, batch)) => {
                // Held: dropped; a cancelled request gets no reply.
                self.ledger.host_remove(&key);
                self.queue.forget(&key);
                self.skip_batch_member(batch);
            }
            Some((HostState::Sent { generation, wire }, method, batch)) => {
                // Under the id the server knows the request by.
                let out = match (&wire, message::span_in(line, t.into())) {
                    (Some(w), Some(range)) => message::splice(line, range, w.as_str().as_bytes()),
                    _ => line.to_vec(),
                };
                if self
                    .fleet
                    .gens
                    .get(&generation)
                    .is_some_and(|g| !g.phase.killed())
                {
                    self.out.push(Action::ToServer(generation, out));
                }
                if method != Method::Initialize {
                    // No answer is expected any more.
                    if let Some(w) = wire {
                        self.ledger.own_forget(generation, w.as_str());
                    }
                    self.ledger.host_remove(&key);
                    self.skip_batch_member(batch);
                    self.after_answer(generation);
                }
            }
            None => tracing::debug!("host cancelled no request in flight: dropped"),
        }
    }

    fn skip_batch_member(&mut self, batch: Option<BatchId>) {
        if let Some(b) = batch
            && let Some(whole) = self.batches.skip(b)
        {
            self.send_host(whole);
        }
    }

    /// A host notification for the serving generation (held, in order,
    /// while host traffic is).
    fn notify_server(&mut self, line: Vec<u8>) {
        if self.fleet.ending().is_some() || self.target.suspended.is_some() {
            return;
        }
        if self.holding() {
            self.queue.hold(Held::Notification(line));
        } else {
            self.dispatch(Held::Notification(line));
        }
    }

    fn on_host_response(&mut self, line: &Line, now: std::time::Instant) {
        let env = line.envelope();
        let Some(id) = env.id else {
            tracing::warn!("host sent an error response without id: dropped");
            return;
        };
        match self.ledger.asked_take(id.get()) {
            Some(ToHost::RootsList(seq)) => {
                let answer = match env.result {
                    Some(r) => Ok(r.get()),
                    None => Err(RootsUnknown::HostError),
                };
                self.on_host_roots(seq, answer, now);
            }
            Some(ToHost::Server {
                generation,
                id_raw,
                check,
                ..
            }) => {
                let alive = self
                    .fleet
                    .gens
                    .get(&generation)
                    .is_some_and(|g| !g.phase.stopping());
                if let Some(check) = check {
                    let result = (!env.is_error).then(|| {
                        env.result
                            .and_then(|r| serde_json::from_str::<Value>(r.get()).ok())
                            .unwrap_or(Value::Null)
                    });
                    if let Err(refusal) = self.guard.on_answer(&check, result.as_ref()) {
                        if alive {
                            self.out
                                .push(Action::ToServer(generation, refusal.response(&id_raw)));
                        }
                        return;
                    }
                }
                let Some(range) = message::span_in(line.bytes(), id) else {
                    return;
                };
                if alive {
                    let out = message::splice(line.bytes(), range, id_raw.as_bytes());
                    self.out.push(Action::ToServer(generation, out));
                } else {
                    tracing::debug!(
                        generation = generation,
                        "host answered a request of a server that is gone: dropped"
                    );
                }
            }
            None => {
                tracing::warn!(id = %id.get(), "host sent a response to no request in flight: dropped")
            }
        }
    }

    // ------------------------------------------------------------------
    // Holding and sending

    /// Answer every held host request with an error saying `why`, and
    /// drop the held notifications (no server may take them).
    pub(super) fn refuse_held(&mut self, why: &str) {
        while let Some(h) = self.queue.next() {
            if let Held::Request(key, _) = h {
                self.answer_error(&key, code::SERVER_GONE, why);
            }
        }
    }

    /// Whether host traffic is held: while the host's roots are being
    /// asked for (and planned), while a plan dropping them is being made,
    /// and while no generation serves the target.
    pub(super) fn holding(&self) -> bool {
        self.exchange.awaiting.is_some()
            || self.planning.is_some_and(|p| p.hold)
            || self.fleet.serving_target().is_none()
    }

    /// Send what is held, in order, while nothing holds it.
    pub(super) fn flush(&mut self) {
        while !self.holding() {
            let Some(h) = self.queue.next() else {
                break;
            };
            self.dispatch(h);
        }
    }

    /// Send one host message to the serving generation.
    fn dispatch(&mut self, held: Held) {
        let Some(g) = self.fleet.current else {
            self.queue.hold_first(held);
            return;
        };
        match held {
            Held::Notification(line) => self.out.push(Action::ToServer(g, line)),
            Held::Request(key, line) => {
                let Some(r) = self.ledger.host(key.as_str()) else {
                    // Cancelled meanwhile.
                    return;
                };
                if r.method == Method::Initialize {
                    return self.send_initialize(key, g);
                }
                let line = self.refilled(key.as_str(), line);
                self.send_request(key, line, g);
            }
        }
    }

    /// Send host request `key` to `g`: under the host's id, or, if `g` has
    /// a request of rootfence's with that id in flight, on the host's
    /// behalf under a fresh id.
    fn send_request(&mut self, key: IdKey, line: Vec<u8>, g: GenId) {
        if self.ledger.own_has(g, key.as_str()) {
            let wire = self.ledger.own_send(g, Own::OnBehalf(key.clone()));
            let out = match message::parse(&line).ok().and_then(|e| e.id) {
                Some(id) => match message::span_in(&line, id) {
                    Some(range) => message::splice(&line, range, wire.as_bytes()),
                    None => line.clone(),
                },
                None => line.clone(),
            };
            if let Some(r) = self.ledger.host_mut(key.as_str()) {
                r.state = HostState::Sent {
                    generation: g,
                    wire: Some(IdKey::of(&wire)),
                };
            }
            self.out.push(Action::ToServer(g, out));
            return;
        }
        if let Some(r) = self.ledger.host_mut(key.as_str()) {
            r.state = HostState::Sent {
                generation: g,
                wire: None,
            };
        }
        self.out.push(Action::ToServer(g, line));
    }

    /// Send the host's `initialize` to `g`, with the capabilities the
    /// policy allows.
    fn send_initialize(&mut self, key: IdKey, g: GenId) {
        let Some(r) = self.ledger.host(key.as_str()) else {
            return;
        };
        let line = self
            .handshake
            .initialize_line(r.id(&key), &self.target.policy);
        let offer = self.handshake.offer(&self.target.policy);
        if let Some(generation) = self.fleet.gens.get_mut(&g) {
            generation.offer = offer;
        }
        self.send_request(key, line, g);
    }
}
