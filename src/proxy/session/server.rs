//! The servers' side: what rootfence does with each line a generation
//! writes, and with its stdout closing or its process ending.
//!
//! What a generation may say depends on its phase: the serving and
//! draining ones are relayed (answers to the host requests they handle,
//! their requests to the host through the guard and with fresh ids, their
//! notifications); a starting one only answers rootfence's own requests
//! and has its `roots/list` answered; a stopped one's answers to host
//! requests still in flight are taken until it exits, unless it was
//! killed, whose every word is dropped. Every generation's `roots/list` is
//! answered by rootfence with exactly the roots its sandbox enforces.

use std::time::Instant;

use serde_json::Value;
use serde_json::value::RawValue;

use super::Session;
use super::batch::BatchId;
use super::io::Frame;
use super::io::GenId;
use super::io::ServerEvent;
use super::ledger::{HostState, IdKey, MAX_ID_BYTES, Method, Own, ToHost};
use super::stateless::Verdict;
use crate::proxy::guard::{self, version};
use crate::proxy::message::{self, Envelope, Ident, Invalid, Kind, Line, code};

#[derive(serde::Deserialize)]
struct CompleteParams {
    #[serde(rename = "elicitationId")]
    elicitation_id: String,
}

#[derive(serde::Deserialize)]
struct MetaParams<'a> {
    #[serde(rename = "_meta", borrow, default)]
    meta: Option<Meta<'a>>,
}

#[derive(serde::Deserialize)]
struct Meta<'a> {
    #[serde(rename = "progressToken", borrow, default)]
    token: Option<&'a RawValue>,
}

/// The id to answer a server's refused request under: its own, unless
/// it is longer than [`MAX_ID_BYTES`] (then `null`: echoing it would make
/// rootfence hold and write again what the server sent, for every request).
fn echo_id(id: &str) -> Option<&str> {
    (id.len() <= MAX_ID_BYTES).then_some(id)
}

/// What a generation may say, by phase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Voice {
    /// Serving or draining: relayed.
    Full,
    /// Starting: only answers to rootfence and its `roots/list`.
    Rising,
    /// Stopped gracefully: answers to host requests in flight only.
    Closing,
    /// Killed, or gone: nothing.
    Mute,
}

/// A server's answer to relay to the host: the line, with these edits.
struct Relay {
    edits: Vec<(std::ops::Range<usize>, Vec<u8>)>,
    batch: Option<BatchId>,
}

impl Relay {
    /// The line with the edits made (moved as it is when there are none).
    fn apply(self, line: Vec<u8>) -> Vec<u8> {
        if self.edits.is_empty() {
            return line;
        }
        let mut e: Vec<(std::ops::Range<usize>, &[u8])> = self
            .edits
            .iter()
            .map(|(r, w)| (r.clone(), w.as_slice()))
            .collect();
        message::splice_all(&line, &mut e)
    }
}

impl Session {
    /// An event from a generation's tasks.
    pub(super) fn on_server_event(&mut self, ev: ServerEvent, now: Instant) {
        match ev {
            ServerEvent::Frame(g, Frame::Line(line)) => self.on_server_line(g, line, now),
            ServerEvent::Frame(g, Frame::TooLong { len, ident }) => {
                let max = self.inputs.policy.raw.limits.max_message_bytes;
                let why = format!(
                    "message of {len} bytes exceeds the limit of {max} bytes (limits.max_message_bytes in the rootfence policy)"
                );
                self.on_server_unrelayable(g, ident, &why, now);
            }
            ServerEvent::Eof(g) => self.on_stdout_closed(g, now),
            ServerEvent::Denied(g, hint) => self.on_denied(g, hint),
            ServerEvent::Exited(g, status) => self.on_exited(g, status, now),
        }
    }

    fn voice(&self, g: GenId) -> Voice {
        match self.fleet.gens.get(&g).map(|s| &s.phase) {
            None => Voice::Mute,
            Some(p) if p.killed() => Voice::Mute,
            Some(p) if p.stopping() => Voice::Closing,
            Some(p) if p.rising() => Voice::Rising,
            Some(_) => Voice::Full,
        }
    }

    fn send_server(&mut self, g: GenId, line: Vec<u8>) {
        self.out.push(super::io::Action::ToServer(g, line));
    }

    /// A server line rootfence does not relay (over the size limit, or
    /// unreadable: `why`): a request is refused back to the server by its
    /// id; an answer to a host request is replaced by an error to the host
    /// (the request is not left waiting); a notification is dropped.
    fn on_server_unrelayable(&mut self, g: GenId, ident: Ident, why: &str, now: Instant) {
        tracing::warn!(
            generation = g,
            method = ident.method.as_deref().unwrap_or("?"),
            id = ident.id.as_deref().unwrap_or("?"),
            "server message not relayed: {why}"
        );
        if self.voice(g) == Voice::Mute {
            return;
        }
        let Some(id) = ident.id else {
            if ident.method.is_none() && !ident.answer {
                self.send_server(
                    g,
                    message::error_response(None, code::PARSE_ERROR, &format!("rootfence: {why}")),
                );
            } else if ident.has_id && !ident.answer {
                // A request whose id is no id (`1e400`): refused under
                // `null`, not taken for a notification.
                self.send_server(
                    g,
                    message::error_response(
                        None,
                        code::INVALID_REQUEST,
                        &format!("rootfence did not relay this request: {why}"),
                    ),
                );
            }
            return;
        };
        if !ident.answer {
            if ident.method.is_some() {
                self.send_server(
                    g,
                    message::error_response(
                        echo_id(&id),
                        code::INVALID_REQUEST,
                        &format!("rootfence did not relay this request: {why}"),
                    ),
                );
            }
            return;
        }
        // An answer: to rootfence's own request, or to a host request.
        let key = IdKey::canonical(&id);
        let host_key = match self.ledger.own_take(g, &key) {
            Some(Own::OnBehalf(k)) => Some(k),
            Some(Own::Initialize) => {
                return self.on_replayed_init(g, None, now);
            }
            Some(_) => None,
            None => self
                .ledger
                .host(&key)
                .filter(|r| {
                    r.state
                        == HostState::Sent {
                            generation: g,
                            wire: None,
                        }
                })
                .map(|_| IdKey::of(&key)),
        };
        if let Some(k) = host_key {
            self.answer_error(
                &k,
                code::INTERNAL_ERROR,
                &format!("rootfence did not relay the server's answer: {why}"),
            );
            self.after_answer(g);
        }
    }

    fn on_server_line(&mut self, g: GenId, bytes: Vec<u8>, now: Instant) {
        let voice = self.voice(g);
        if voice == Voice::Mute {
            return;
        }
        if message::is_batch(&bytes) {
            return self.on_server_batch(g, &bytes, now);
        }
        let line = match Line::read(bytes) {
            Ok(line) => line,
            Err(Invalid::Batch) => return,
            Err(Invalid::Unreadable(u)) => {
                let why = format!("rootfence cannot read it unambiguously: {}", u.why);
                return self.on_server_unrelayable(g, u.ident, &why, now);
            }
            Err(Invalid::NotJsonRpc { why, id }) => {
                tracing::warn!(
                    generation = g,
                    "server sent an invalid JSON-RPC message ({why}): dropped"
                );
                self.send_server(
                    g,
                    message::error_response(
                        id.as_deref().and_then(echo_id),
                        code::INVALID_REQUEST,
                        &format!("Invalid Request: {why}"),
                    ),
                );
                return;
            }
        };
        let env = line.envelope();
        if guard::route::server_message(env.kind, env.method.as_deref())
            == guard::route::ServerRoute::Drop
        {
            // A server -> host request method without an id: it can be
            // neither judged nor answered.
            let method = env.method.as_deref().unwrap_or_default();
            tracing::warn!(
                generation = g,
                method,
                "server sent a request method as a notification: dropped"
            );
            self.guard.on_dropped_notification(g, method);
            return;
        }
        match env.kind {
            Kind::Response => {
                if let Some(relay) = self.on_server_response(g, line.bytes(), &env, now) {
                    drop(env);
                    let batch = relay.batch;
                    let out = relay.apply(line.into_bytes());
                    self.reply_host(out, batch);
                    self.after_answer(g);
                }
            }
            Kind::Request => self.on_server_request(g, voice, line.bytes(), &env, now),
            Kind::Notification if voice == Voice::Full => {
                self.on_server_notification(g, line.bytes(), &env)
            }
            Kind::Notification => {
                tracing::debug!(
                    generation = g,
                    "notification from a server not serving: dropped"
                );
            }
        }
    }

    /// A batch from `g`: its members one by one in protocol 2025-03-26,
    /// else refused whole.
    fn on_server_batch(&mut self, g: GenId, line: &[u8], now: Instant) {
        if self.handshake.protocol.as_deref() == Some("2025-03-26")
            && let Ok(items) = serde_json::from_slice::<Vec<&RawValue>>(line)
        {
            for item in items {
                self.on_server_line(g, item.get().as_bytes().to_vec(), now);
            }
            return;
        }
        tracing::warn!(
            generation = g,
            "server sent a batch outside protocol 2025-03-26: refused"
        );
        // Its members asking the host something are recorded; its members
        // answering a host request answer it with an error (the host's
        // request is never left waiting).
        let items: Vec<&RawValue> = serde_json::from_slice(line).unwrap_or_default();
        for item in items {
            if let Ok(m) = message::parse(item.get().as_bytes())
                && let Some(method) = m.method.as_deref()
                && guard::route::SERVER_REQUEST_METHODS.contains(&method)
            {
                self.guard.on_dropped_batch_member(g, method);
            }
            let ident = crate::proxy::sniff::ident(item.get().as_bytes());
            if ident.answer && ident.id.is_some() {
                self.on_server_unrelayable(
                    g,
                    ident,
                    "it came in a batch, and batches are not allowed in this protocol revision",
                    now,
                );
            }
        }
        self.send_server(
            g,
            message::error_response(
                None,
                code::INVALID_REQUEST,
                "Invalid Request: batches are not allowed in this protocol revision",
            ),
        );
    }

    fn on_server_response(
        &mut self,
        g: GenId,
        line: &[u8],
        env: &Envelope<'_>,
        now: Instant,
    ) -> Option<Relay> {
        let Some(id) = env.id else {
            tracing::warn!(
                generation = g,
                "server sent an error response without id: dropped"
            );
            return None;
        };
        let key = IdKey::canonical(id.get());
        if let Some(own) = self.ledger.own_take(g, &key) {
            let result = env.result.map(|r| r.get());
            match own {
                Own::Initialize => self.on_replayed_init(g, result, now),
                Own::Replay => {}
                Own::List(method) => {
                    if let Some(r) = result
                        && let Some(note) = self.handshake.compare_list(method, r.to_string())
                    {
                        self.send_host(note);
                    }
                }
                Own::OnBehalf(host_key) => {
                    // Answered under rootfence's id: the host gets it under
                    // its own.
                    return self.answer_host(g, host_key.as_str(), line, env, true, now);
                }
            }
            return None;
        }
        let ours = self.ledger.host(&key).is_some_and(|r| {
            r.state
                == HostState::Sent {
                    generation: g,
                    wire: None,
                }
        });
        if !ours {
            tracing::warn!(generation = g, id = %id.get(), "server answered no request in flight: dropped");
            return None;
        }
        let key = key.into_owned();
        self.answer_host(g, &key, line, env, false, now)
    }

    /// `g` answered host request `key` with `line` (under rootfence's own
    /// id when `mapped`): judged; what to relay to the host under its id
    /// (the caller owns the line, which goes on without a copy).
    fn answer_host(
        &mut self,
        g: GenId,
        key: &str,
        line: &[u8],
        env: &Envelope<'_>,
        mapped: bool,
        now: Instant,
    ) -> Option<Relay> {
        let mut new_result = None;
        if let Some(r) = env.result {
            match self.judge_result(g, key, r, env.result_guarded, now) {
                Verdict::Done => return None,
                Verdict::Relay(changed) => new_result = changed,
            }
        }
        if let Some(e) = env.error
            && let Verdict::Done = self.judge_error(g, key, e)
        {
            return None;
        }
        let (host_key, r) = self.ledger.host_remove(key)?;
        // The result's text (its UTF-8 checked once more) only for the
        // methods whose answers rootfence reads or keeps.
        let result = || env.result.map(|x| x.get());
        if r.method == Method::Discover
            && new_result.is_none()
            && let Some(filtered) = result().and_then(version::filter_discover_result)
        {
            tracing::info!("server/discover: revisions the guard does not know are not offered");
            new_result = Some(filtered);
        }
        if matches!(r.method, Method::Initialize | Method::List { .. }) {
            self.record_answer(g, r.method, new_result.as_deref().or(result()), now);
        }
        if r.method == Method::Initialize
            && let Some(with) = new_result
                .as_deref()
                .or(result())
                .and_then(|x| self.handshake.offer_logging(x))
        {
            new_result = Some(with);
        }
        let mut edits: Vec<(std::ops::Range<usize>, Vec<u8>)> = Vec::new();
        // Under the host's own id, as the host wrote it (the server's
        // may be rootfence's, or the same id written otherwise: `5.0`).
        let host_id = r.id(&host_key);
        if mapped || env.id.is_some_and(|id| id.bytes() != host_id.as_bytes()) {
            let range = env.id.and_then(|id| message::span_in(line, id))?;
            edits.push((range, host_id.as_bytes().to_vec()));
        }
        if let Some(new) = new_result
            && let Some(range) = env.result.and_then(|x| message::span_in(line, x))
        {
            edits.push((range, new.into_bytes()));
        }
        if env.is_error
            && let Ok(text) = std::str::from_utf8(line)
            && let Some(error) = message::member(text, "error")
            && let Some(filtered) = version::filter_version_error(error)
            && let Some(range) = message::span_of(line, error)
        {
            edits.push((range, filtered.into_bytes()));
        }
        Some(Relay {
            edits,
            batch: r.batch,
        })
    }

    /// What rootfence keeps of a host request's answer: the server's
    /// handshake, the lists the host saw.
    fn record_answer(&mut self, g: GenId, method: Method, result: Option<&str>, now: Instant) {
        match (method, result) {
            (Method::Initialize, result) => {
                if let Some(r) = result {
                    self.out.push(super::io::Action::ServerStarted(g));
                    if self.handshake.server_init.is_none() {
                        self.remember_init(r);
                    }
                    self.handshake.record_server_init(r);
                }
                // A host that said `initialized` before this answer.
                if self.handshake.host_initialized
                    && let Some(generation) = self.fleet.gens.get_mut(&g)
                    && !generation.initialized
                {
                    generation.initialized = true;
                    self.send_server(g, message::notification("notifications/initialized", None));
                }
                // The first handshake is through: a replacement may now be
                // launched (and replayed).
                self.settle(now);
            }
            (Method::List { method, paged }, Some(r)) => {
                self.handshake.record_list(method, paged, r);
            }
            _ => {}
        }
    }

    fn on_server_request(
        &mut self,
        g: GenId,
        voice: Voice,
        line: &[u8],
        env: &Envelope<'_>,
        now: Instant,
    ) {
        let method = env.method.as_deref().unwrap_or_default();
        let Some(id) = env.id else { return };
        let id_raw = id.get().to_string();
        if let Some(why) = self.ledger.may_ask(id.get(), env.params) {
            tracing::warn!(generation = g, method, "server request refused: {why}");
            self.send_server(
                g,
                message::error_response(
                    echo_id(&id_raw),
                    code::INVALID_REQUEST,
                    &format!("rootfence: {why}"),
                ),
            );
            return;
        }
        if method == "roots/list" {
            let reply = self.roots_result(g, &id_raw);
            self.send_server(g, reply);
            return;
        }
        if self.host_gone() {
            self.send_server(
                g,
                message::error_response(
                    echo_id(&id_raw),
                    code::SERVER_GONE,
                    "rootfence: the host closed its side of the session and can answer nothing more",
                ),
            );
            return;
        }
        if voice != Voice::Full {
            tracing::debug!(
                generation = g,
                method,
                "request from a server not serving: refused"
            );
            self.send_server(
                g,
                message::error_response(
                    echo_id(&id_raw),
                    code::SERVER_GONE,
                    "rootfence: this server is not connected to the host (it is starting or stopping)",
                ),
            );
            return;
        }
        let (mut params, mut check) = (None, None);
        if guard::route::server_message(env.kind, Some(method)) == guard::route::ServerRoute::Judge
        {
            match self.guard_request(g, method, env.params, line.len(), now) {
                guard::Verdict::Refuse(refusal) => {
                    self.send_server(g, refusal.response(&id_raw));
                    return;
                }
                guard::Verdict::Forward {
                    params: p,
                    check: c,
                } => (params, check) = (p, c),
            }
        }
        // Its progress token, if any: the host is given this request's id
        // instead (unique in the session), mapped back on the host's
        // progress notifications.
        let token = env.params.and_then(|p| {
            serde_json::from_str::<MetaParams<'_>>(p.get())
                .ok()
                .and_then(|m| m.meta)
                .and_then(|m| m.token)
                .and_then(|t| message::span_in(line, t.into()).map(|r| (r, t.get().to_string())))
        });
        let host_id = self.ledger.next_asked().to_string();
        let out = match params {
            // A clamp: the request is rewritten.
            Some(mut p) => {
                if token.is_some()
                    && let Some(meta) = p.get_mut("_meta").and_then(Value::as_object_mut)
                {
                    meta.insert(
                        "progressToken".into(),
                        serde_json::from_str(&host_id).unwrap_or(Value::Null),
                    );
                }
                message::request(&host_id, method, Some(&p.to_string()))
            }
            None => {
                let Some(id_range) = message::span_in(line, id) else {
                    return;
                };
                let mut edits = vec![(id_range, host_id.as_bytes())];
                if let Some((range, _)) = &token {
                    edits.push((range.clone(), host_id.as_bytes()));
                }
                message::splice_all(line, &mut edits)
            }
        };
        let issued = self.ledger.ask(ToHost::Server {
            generation: g,
            id_raw,
            check,
            token: token.map(|(_, t)| t),
        });
        debug_assert_eq!(issued.to_string(), host_id);
        self.send_host(out);
    }

    /// A notification from the serving (or a draining) generation. Those
    /// that name an id or a token are relayed only for what `g` owns: its
    /// own requests to the host (cancelled), the host requests it handles
    /// (progress), the URL elicitations it sent (elicitation/complete).
    /// Roots belong to rootfence: the server's `roots/list_changed` is
    /// not relayed.
    fn on_server_notification(&mut self, g: GenId, line: &[u8], env: &Envelope<'_>) {
        let method = env.method.as_deref().unwrap_or_default();
        let owned = match method {
            "notifications/cancelled" => {
                // The server cancels one of its requests to the host: use
                // the id the host knows.
                let target = message::cancelled_id(env.params);
                if let Some(t) = target
                    && let Some(hid) = self.ledger.asked_find(g, &IdKey::canonical(t.get()))
                    && let Some(range) = message::span_in(line, t.into())
                {
                    self.ledger.asked_remove(hid);
                    let out = message::splice(line, range, hid.to_string().as_bytes());
                    return self.send_host(out);
                }
                false
            }
            "notifications/progress" => message::progress_token(env.params)
                .is_some_and(|t| self.ledger.host_token_generation(t.get()) == Some(g)),
            "notifications/elicitation/complete" => env
                .params
                .and_then(|p| serde_json::from_str::<CompleteParams>(p.get()).ok())
                .is_some_and(|c| self.guard.url_elicitation_done(g, &c.elicitation_id)),
            "notifications/roots/list_changed" => false,
            "notifications/message" => {
                if let Some(p) = env.params
                    && let Some(renamed) = rename_reserved_logger(p.get())
                {
                    // A server speaking under rootfence's name: its words
                    // reach the host under its own, or not at all.
                    tracing::warn!(
                        generation = g,
                        "the server logged under a name reserved for rootfence's notes: renamed \"server:...\""
                    );
                    if let (Some(renamed), Some(range)) = (renamed, message::span_in(line, p)) {
                        self.send_host(message::splice(line, range, renamed.as_bytes()));
                    }
                    return;
                }
                true
            }
            // A task's status with questions in it: the host sees them
            // through its `tasks/get`, judged.
            "notifications/tasks" | "notifications/tasks/status" => !env
                .params
                .is_some_and(|p| message::may_name(p.get(), "inputRequests")),
            _ => true,
        };
        if owned {
            self.send_host(line.to_vec());
        } else {
            tracing::debug!(
                generation = g,
                method,
                "server notification naming nothing it owns: dropped"
            );
        }
    }

    /// Ask the guard about a server request `method` in [`guard::GUARDED`].
    fn guard_request(
        &mut self,
        g: GenId,
        method: &str,
        params: Option<message::Raw<'_>>,
        bytes: usize,
        now: Instant,
    ) -> guard::Verdict {
        let params: Value = params
            .and_then(|p| serde_json::from_str(p.get()).ok())
            .unwrap_or(Value::Null);
        let revision = self.handshake_revision();
        let host_caps = self
            .handshake
            .host_init
            .as_ref()
            .and_then(|v| v.get("capabilities"))
            .unwrap_or(&Value::Null);
        let ctx = guard::Context {
            policy: &self.inputs.policy,
            revision,
            host_caps,
            generation: g,
        };
        self.guard.on_request(ctx, method, &params, bytes, now)
    }

    /// The answer to `g`'s `roots/list`: exactly the roots its sandbox
    /// enforces (canonical URIs, the host's names), in the order given.
    fn roots_result(&self, g: GenId, id_raw: &str) -> Vec<u8> {
        let roots = self
            .fleet
            .gens
            .get(&g)
            .map(|s| s.roots.as_slice())
            .unwrap_or_default();
        let result = super::stateless::roots_value(&self.inputs, roots);
        message::result_response(id_raw, &result.to_string())
    }
}

/// `params` (raw JSON) of a server's `notifications/message` with its
/// `logger` renamed `server:NAME` when NAME is reserved for rootfence's
/// own notes ([`super::handshake::reserved_logger`]): `Some(None)` when
/// it must be renamed and cannot be (the message is dropped); `None` when
/// it needs no change.
///
/// # Security
///
/// rootfence's notes carry the logger `rootfence`; no server message
/// reaches the host under a name that could be taken for it.
fn rename_reserved_logger(params: &str) -> Option<Option<String>> {
    if !message::may_name(params, "logger") {
        return None;
    }
    let v: Value = serde_json::from_str(params).ok()?;
    let name = v.get("logger")?.as_str()?;
    if !super::handshake::reserved_logger(name) {
        return None;
    }
    let renamed = Value::String(format!("server:{name}")).to_string();
    Some(message::edit_members(params, &[("logger", Some(&renamed))]))
}
