//! The guard's look at every host request and at the server's answer to
//! it, in both eras (the decisions are in `guard::stateless` and
//! `guard::version`; this file applies them to the session).
//!
//! A host request, before it is recorded:
//!
//! - a protocol version in its `_meta` that the guard does not know is
//!   answered with `-32022` (the server never sees it);
//! - `initialize` offers no revision newer than the guard knows;
//! - the client capabilities in its `_meta` (2026-07-28, every request,
//!   `server/discover` included) are shaped as `initialize`'s are;
//! - a `tools/call`, `prompts/get` or `resources/read` that retries a
//!   result rootfence changed (its `requestState` is rootfence's token)
//!   gets the server's `requestState` back, the enforced roots filled in,
//!   its form answers checked; the host's roots it carries (rootfence
//!   asked) are applied as a handshake-era `roots/list` answer is, and the
//!   request waits for the generation serving the new target;
//! - the host's first such request of the stateless era, when it declared
//!   roots, is answered by rootfence with a result asking only for its
//!   roots (nothing reaches the server): the host's retry brings them.
//!
//! A server's answer to a host request:
//!
//! - an `input_required` result (or one carrying `inputRequests`) is
//!   judged ([`Guard::on_input_required`](crate::proxy::guard::Guard::on_input_required)):
//!   relayed, relayed changed, retried by rootfence itself under its own
//!   id (roots only; the final answer goes to the host under its id), or
//!   refused with `-32001`;
//! - a `server/discover` result lists only the revisions the guard knows,
//!   and so does a `-32022` error.

use std::time::Instant;

use serde_json::Value;

use super::Session;
use super::io::{Action, GenId};
use super::ledger::{HostState, IdKey, Judged, Own, Refill};
use crate::proxy::guard::stateless::{self, InputContext, InputPlan, RetryPlan};
use crate::proxy::guard::{Refusal, Revision, version};
use crate::proxy::message::{self, code};
use crate::roots::CanonicalRoot;

/// What the guard made of a host request.
pub(super) enum Prepared {
    /// Answer the host with this line; nothing goes to the server.
    Answered(Vec<u8>),
    /// Send it.
    Send {
        /// The params to send instead of the host's (raw JSON).
        params: Option<String>,
        /// For a request whose result may be `input_required`: how to
        /// judge it.
        judged: Option<Box<Judged>>,
    },
}

/// What to do with a server's answer to a host request.
pub(super) enum Verdict {
    /// Relay it to the host; with this result (raw JSON) instead of the
    /// server's.
    Relay(Option<String>),
    /// Handled: the host was answered, or rootfence sent the request again.
    Done,
}

/// The roots `roots` as a `roots/list` result: `{"roots":[{uri,name}]}`,
/// in the order their inputs were given ([`super::target::Inputs::given_order`]).
pub(super) fn roots_value(inputs: &super::target::Inputs, roots: &[CanonicalRoot]) -> Value {
    let list: Vec<Value> = inputs
        .given_order(roots)
        .into_iter()
        .map(|r| serde_json::json!({"uri": r.uri, "name": r.name}))
        .collect();
    serde_json::json!({ "roots": list })
}

/// The protocol version a request's `params._meta` names, if the guard
/// knows it.
fn meta_revision(params: &str) -> Option<Revision> {
    let v = message::member(params, "_meta")
        .and_then(|m| message::member(m, version::META_PROTOCOL_VERSION))?;
    Revision::known(&serde_json::from_str::<String>(v).ok()?)
}

/// Whether a request's `params._meta` carries client capabilities.
fn has_meta_capabilities(params: &str) -> bool {
    message::member(params, "_meta")
        .and_then(|m| message::member(m, stateless::META_CLIENT_CAPABILITIES))
        .is_some()
}

/// Whether client capabilities declare roots.
fn declares_roots(caps: &Value) -> bool {
    caps.get("roots").is_some_and(Value::is_object)
}

/// `params` with the members `keys` of its `inputResponses` set to `roots`.
fn fill_roots(params: &str, keys: &[String], roots: &Value) -> Option<String> {
    let responses = message::member(params, "inputResponses")?;
    let text = roots.to_string();
    let edits: Vec<(&str, Option<&str>)> = keys
        .iter()
        .map(|k| (k.as_str(), Some(text.as_str())))
        .collect();
    let responses = message::edit_members(responses, &edits)?;
    message::edit_members(params, &[("inputResponses", Some(&responses))])
}

/// No capabilities.
static NULL: Value = Value::Null;

/// The capabilities the host declared in `initialize` (`null` before).
fn init_capabilities(h: &super::handshake::Handshake) -> &Value {
    h.host_init
        .as_ref()
        .and_then(|v| v.get("capabilities"))
        .unwrap_or(&NULL)
}

impl Session {
    /// The revision of the handshake: negotiated, else what the host
    /// asked for, else the newest handshake revision.
    pub(super) fn handshake_revision(&self) -> Revision {
        let requested = self
            .handshake
            .host_init
            .as_ref()
            .and_then(|v| v.get("protocolVersion"))
            .and_then(Value::as_str);
        Revision::parse(
            self.handshake
                .protocol
                .as_deref()
                .or(requested)
                .unwrap_or("2025-11-25"),
        )
    }

    /// The guard's look at host request `method` with id `id_raw` and
    /// `params` (raw JSON), before it is recorded (see the module
    /// documentation).
    pub(super) fn prepare_request(
        &mut self,
        id_raw: &str,
        method: &str,
        params_raw: Option<message::Raw<'_>>,
        guarded: Option<message::Guarded<'_>>,
        now: Instant,
    ) -> Prepared {
        // The params' text is read (its UTF-8 checked once more) only when
        // something below needs it: most requests need only its length.
        let text = std::cell::OnceCell::new();
        let params = || *text.get_or_init(|| params_raw.map(message::Raw::get));
        let base = || params().unwrap_or("null");
        // Most requests (every one of the handshake era) have no `_meta`
        // and no `requestState`: known from the envelope's pass, or looked
        // for once, cheaply. (`meta` true means "may be there".)
        let meta = match guarded {
            Some(g) => g.meta.is_some(),
            None => params().is_some_and(|p| message::may_name(p, "_meta")),
        };
        if meta
            && let Some(p) = params()
            && let Err(unknown) = version::check_request(p)
        {
            tracing::warn!(
                method,
                requested = %unknown.requested,
                "host request in a protocol revision the guard does not know: refused"
            );
            return Prepared::Answered(version::unsupported_response(id_raw, &unknown));
        }
        if method == "initialize" {
            let capped = params().and_then(version::cap_initialize);
            if capped.is_some() {
                tracing::info!(
                    "the host offered a protocol revision newer than the guard knows: the server is offered {} at most",
                    Revision::LATEST
                );
            }
            return Prepared::Send {
                params: capped,
                judged: None,
            };
        }
        if method == stateless::TASK_UPDATE {
            return self.prepare_task_update(id_raw, base(), params_raw.is_some());
        }
        let policy = &self.inputs.policy.raw;
        let Some(m) = stateless::INPUT_REQUIRED_METHODS
            .iter()
            .copied()
            .chain([stateless::TASK_GET, stateless::TASK_RESULT])
            .find(|m| *m == method)
        else {
            return Prepared::Send {
                params: if meta {
                    params().and_then(|p| stateless::shape_meta_capabilities(p, policy))
                } else {
                    None
                },
                judged: None,
            };
        };
        self.prepare_judged(id_raw, m, params_raw, guarded, meta, now)
    }

    /// [`Session::prepare_request`] for a request whose answer the guard
    /// judges (`m` is one of the methods that may get `input_required`,
    /// or `tasks/get`): its revision and capabilities, the host's retry
    /// read, the host asked for its roots first when it must be.
    fn prepare_judged(
        &mut self,
        id_raw: &str,
        m: &'static str,
        params_raw: Option<message::Raw<'_>>,
        guarded: Option<message::Guarded<'_>>,
        meta: bool,
        now: Instant,
    ) -> Prepared {
        let base = || params_raw.map_or("null", message::Raw::get);
        let meta_rev = if meta { meta_revision(base()) } else { None };
        let revision = meta_rev.unwrap_or_else(|| self.handshake_revision());
        let is_stateless = meta_rev.is_some_and(Revision::is_stateless);
        let meta_caps =
            (meta && has_meta_capabilities(base())).then(|| stateless::host_capabilities(base()));
        let host_caps = match &meta_caps {
            Some(c) => c,
            None => init_capabilities(&self.handshake),
        };
        let mut edited = None;
        let mut refill = None;
        let mut roots = Value::Null;
        let state = match guarded {
            Some(g) => g.request_state.is_some(),
            None => message::may_name(base(), "requestState"),
        };
        let retry = if state {
            roots = roots_value(&self.inputs, self.target.roots());
            self.guard.on_host_retry(m, base(), &roots)
        } else {
            RetryPlan::Unchanged
        };
        match retry {
            RetryPlan::Unchanged => {
                if is_stateless
                    && m != stateless::TASK_GET
                    && declares_roots(host_caps)
                    && self.inputs.accepts_host_roots()
                    && !self.host_roots_asked
                {
                    // rootfence learns the host's roots before the server
                    // sees its first request that can carry the question.
                    self.host_roots_asked = true;
                    tracing::info!(
                        method = m,
                        "asking the host for its roots (2026-07-28: inside a result)"
                    );
                    let result = self.guard.ask_host_roots(m);
                    return Prepared::Answered(message::result_response(id_raw, &result));
                }
            }
            RetryPlan::Refuse(r) => {
                tracing::warn!(
                    method = m,
                    rule = r.rule,
                    "host retry refused: {}",
                    r.message
                );
                return Prepared::Answered(r.response(id_raw));
            }
            RetryPlan::Send {
                params,
                host_roots,
                roots_keys,
            } => {
                if let Some(hr) = host_roots {
                    // The retry is held until those roots are planned,
                    // and its answers filled again then (see
                    // [`Session::refilled`]).
                    self.on_host_roots_answer(&hr, now);
                    if !roots_keys.is_empty() {
                        refill = Some(Refill {
                            keys: roots_keys,
                            filled: roots.clone(),
                        });
                    }
                }
                edited = Some(params);
            }
        }
        let policy = &self.inputs.policy.raw;
        if meta {
            let shaped =
                stateless::shape_meta_capabilities(edited.as_deref().unwrap_or(base()), policy);
            if shaped.is_some() {
                edited = shaped;
            }
        }
        let sent_len = edited
            .as_ref()
            .map_or_else(|| params_raw.map_or(4, |p| p.bytes().len()), String::len);
        let judged = Judged {
            method: m,
            params: (is_stateless || sent_len <= stateless::KEEP_PARAMS)
                .then(|| edited.as_deref().unwrap_or(base()).into()),
            revision,
            stateless: is_stateless,
            host_caps: meta_caps,
            own_rounds: 0,
            refill,
        };
        Prepared::Send {
            params: edited.filter(|_| params_raw.is_some()),
            judged: Some(Box::new(judged)),
        }
    }

    /// The host answers a task's questions (`tasks/update`, with `params`
    /// as raw JSON): checked against what rootfence showed it, the roots
    /// filled in.
    fn prepare_task_update(&mut self, id_raw: &str, params: &str, has_params: bool) -> Prepared {
        let roots = roots_value(&self.inputs, self.target.roots());
        match self.guard.on_task_update(params, &roots) {
            RetryPlan::Refuse(r) => {
                tracing::warn!(rule = r.rule, "tasks/update refused: {}", r.message);
                Prepared::Answered(r.response(id_raw))
            }
            RetryPlan::Send { params, .. } => Prepared::Send {
                params: Some(params).filter(|_| has_params),
                judged: None,
            },
            RetryPlan::Unchanged => Prepared::Send {
                params: None,
                judged: None,
            },
        }
    }

    /// The host's roots, given in answer to rootfence's own input request
    /// (a `roots/list` result): applied as a handshake-era `roots/list`
    /// answer is, at once.
    fn on_host_roots_answer(&mut self, result: &Value, now: Instant) {
        self.hold_for_host_roots(now);
        match super::host_roots::parse(&result.to_string(), self.inputs.host_access()) {
            Ok(roots) => {
                tracing::info!(roots = roots.len(), "the host gave its roots");
                self.inputs.set_host_roots(roots);
                self.recompute(super::target::Plan::Reported);
            }
            Err(e) => {
                tracing::warn!(
                    "the host answered rootfence's roots/list input request with something unreadable ({e}): the server keeps only the roots of the command line and the policy"
                );
                self.inputs.set_host_roots(Vec::new());
                self.recompute(super::target::Plan::Reported);
            }
        }
    }

    /// `line`, host request `key`, as it is sent: a retry that brought
    /// the host's roots has its roots answers filled with the roots
    /// enforced now (planned since it came), where they differ.
    pub(super) fn refilled(&mut self, key: &str, line: Vec<u8>) -> Vec<u8> {
        let Some(refill) = self
            .ledger
            .host_mut(key)
            .and_then(|r| r.judged.as_mut())
            .and_then(|j| j.refill.take())
        else {
            return line;
        };
        let after = roots_value(&self.inputs, self.target.roots());
        if after == refill.filled {
            return line;
        }
        let Some((range, params)) = message::parse(&line).ok().and_then(|env| {
            let raw = env.params?;
            let params = fill_roots(raw.get(), &refill.keys, &after)?;
            Some((message::span_in(&line, raw)?, params))
        }) else {
            return line;
        };
        let out = message::splice(&line, range, params.as_bytes());
        if let Some(j) = self
            .ledger
            .host_mut(key)
            .and_then(|r| r.judged.as_mut())
            .filter(|j| j.params.is_some())
        {
            j.params = Some(params.into());
        }
        out
    }

    /// Judge `result` (raw JSON), `g`'s answer to host request `key`, when
    /// it needs it.
    pub(super) fn judge_result(
        &mut self,
        g: GenId,
        key: &str,
        result: message::Raw<'_>,
        guarded: Option<message::Guarded<'_>>,
        now: Instant,
    ) -> Verdict {
        let needs = || match guarded {
            Some(g) => stateless::guarded_needs_judging(
                g.result_type.map(message::Raw::bytes),
                g.input_requests.map(message::Raw::bytes),
            ),
            None => stateless::needs_judging(result.get()),
        };
        let Some(host) = self.ledger.host(key) else {
            return Verdict::Relay(None);
        };
        let Some(j) = host.judged.as_deref() else {
            if !needs() {
                return Verdict::Relay(None);
            }
            // Questions in the answer to a request that cannot carry
            // them (tools/list, ping, ...): no host was ever asked to
            // answer them there, and none is shown unjudged.
            let r = crate::proxy::guard::Refusal::policy(
                "stateless.input_request",
                "input requests the guard cannot judge are refused",
                "the server answered a request that cannot carry questions with an input_required result",
            );
            tracing::warn!(
                generation = g,
                rule = r.rule,
                "input_required result refused: {}",
                r.message
            );
            self.guard.audit_refused_input(g, &r);
            self.answer_refusal(key, &r);
            self.after_answer(g);
            return Verdict::Done;
        };
        if !needs() {
            return Verdict::Relay(None);
        }
        let result = result.get();
        let roots = roots_value(
            &self.inputs,
            self.fleet
                .gens
                .get(&g)
                .map(|s| s.roots.as_slice())
                .unwrap_or_default(),
        );
        let host_caps = match &j.host_caps {
            Some(c) => c,
            None => init_capabilities(&self.handshake),
        };
        let j_params: Option<String> = j.params.as_deref().map(str::to_string);
        let ctx = InputContext {
            policy: &self.inputs.policy,
            revision: j.revision,
            host_caps,
            generation: g,
            method: j.method,
            sent_params: j.params.as_deref(),
            roots: &roots,
            own_rounds: j.own_rounds,
            ask_host_roots: j.stateless
                && declares_roots(host_caps)
                && self.inputs.accepts_host_roots(),
        };
        match self.guard.on_input_required(ctx, result, now) {
            InputPlan::Relay => Verdict::Relay(None),
            InputPlan::ToHost(r) => Verdict::Relay(Some(r)),
            InputPlan::Refuse(r) => self.refuse_answer(g, key, "input_required result", &r),
            InputPlan::Retry(params) => {
                self.retry(g, key, &params);
                Verdict::Done
            }
            InputPlan::TaskRoots(update) => {
                // rootfence answers the task's roots questions itself, then
                // asks for the task again on the host's behalf.
                let id = self.ledger.own_send(g, Own::Replay);
                self.out.push(Action::ToServer(
                    g,
                    message::request(&id, stateless::TASK_UPDATE, Some(&update)),
                ));
                let sent = j_params.unwrap_or_else(|| "{}".into());
                self.retry(g, key, &sent);
                Verdict::Done
            }
        }
    }

    /// Judge `error` (raw JSON), `g`'s error answer to host request `key`:
    /// a `-32042` error (URL elicitation required) carries URLs for the
    /// host to open, judged as URL-mode elicitations; a refusal answers the
    /// host's request instead.
    pub(super) fn judge_error(&mut self, g: GenId, key: &str, error: message::Raw<'_>) -> Verdict {
        let text = error.get();
        if memchr::memmem::find(text.as_bytes(), b"32042").is_none() {
            return Verdict::Relay(None);
        }
        let Ok(error) = serde_json::from_str::<Value>(text) else {
            return Verdict::Relay(None);
        };
        if error.get("code").and_then(Value::as_f64) != Some(-32042.0) {
            return Verdict::Relay(None);
        }
        let j = self.ledger.host(key).and_then(|r| r.judged.as_deref());
        let revision = j.map_or_else(|| self.handshake_revision(), |j| j.revision);
        let host_caps = match j.and_then(|j| j.host_caps.as_ref()) {
            Some(c) => c.clone(),
            None => init_capabilities(&self.handshake).clone(),
        };
        let ctx = crate::proxy::guard::Context {
            policy: &self.inputs.policy,
            revision,
            host_caps: &host_caps,
            generation: g,
        };
        match self.guard.on_url_required(ctx, &error) {
            Ok(()) => Verdict::Relay(None),
            Err(r) => self.refuse_answer(g, key, "URL-elicitation-required error", &r),
        }
    }

    /// The server asked only for roots: send host request `key` to `g`
    /// again under rootfence's own id, with `params`.
    fn retry(&mut self, g: GenId, key: &str, params: &str) {
        let alive = self.fleet.gens.get(&g).is_some_and(|s| !s.phase.stopping());
        let Some(method) = self
            .ledger
            .host(key)
            .and_then(|r| r.judged.as_deref())
            .map(|j| j.method)
        else {
            return;
        };
        if !alive {
            let k = IdKey::of(key);
            self.answer_error(
                &k,
                code::SERVER_GONE,
                "the server was stopped before rootfence could send the request again with the roots it asked for; send the request again",
            );
            self.after_answer(g);
            return;
        }
        let host_key = IdKey::of(key);
        let wire = self.ledger.own_send(g, Own::OnBehalf(host_key));
        if let Some(r) = self.ledger.host_mut(key) {
            r.state = HostState::Sent {
                generation: g,
                wire: Some(IdKey::of(&wire)),
            };
            if let Some(j) = r.judged.as_deref_mut() {
                j.own_rounds += 1;
            }
        }
        tracing::debug!(
            generation = g,
            method,
            "the server asked only for roots: answered and sent again"
        );
        self.out.push(Action::ToServer(
            g,
            message::request(&wire, method, Some(params)),
        ));
    }

    /// `g`'s answer to host request `key` (`what`) was refused: log it and
    /// answer the host with the refusal instead.
    fn refuse_answer(&mut self, g: GenId, key: &str, what: &str, r: &Refusal) -> Verdict {
        tracing::warn!(
            generation = g,
            rule = r.rule,
            "{what} refused: {}",
            r.message
        );
        self.answer_refusal(key, r);
        self.after_answer(g);
        Verdict::Done
    }

    /// Answer host request `key` with the guard's refusal (and forget it).
    pub(super) fn answer_refusal(&mut self, key: &str, refusal: &Refusal) {
        self.answer_with(key, |id| refusal.response(id));
    }
}
