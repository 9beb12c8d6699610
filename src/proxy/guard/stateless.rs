//! The guard in the stateless era (2026-07-28), where the server sends no
//! requests: it answers a host request with an `input_required` result
//! that carries them, and the host retries the same request with its
//! answers.
//!
//! The wire (schema 2026-07-28; Python SDK `mcp_types`,
//! `mcp/client/_input_required.py`, `mcp/server/runner.py`):
//!
//! - every host request's `params._meta` carries
//!   `"io.modelcontextprotocol/protocolVersion"`,
//!   `"io.modelcontextprotocol/clientCapabilities"` (`roots: {}`,
//!   `sampling: {context?, tools?}`, `elicitation: {form?, url?}`,
//!   `experimental`, `extensions`) and `"io.modelcontextprotocol/clientInfo"`;
//!   `server/discover` too. [`shape_meta_capabilities`] applies to that
//!   object what [`super::shape_capabilities`] applies to `initialize`.
//! - a `tools/call`, `prompts/get` or `resources/read` result may be
//!   `{"resultType":"input_required","inputRequests":{KEY:{"method":M,"params":P}},"requestState":S}`
//!   with `M` one of `roots/list`, `sampling/createMessage`,
//!   `elicitation/create`, and at least one of `inputRequests` and
//!   `requestState`;
//! - the host retries the same method with a new id and the same params
//!   plus `"inputResponses":{KEY:RESULT}` and `"requestState":S` echoed
//!   exactly (absent when the result had none).
//!
//! The Python SDK host reads a 2026-07-28 result with `inputRequests` and
//! no `resultType` as `input_required` too (its `InputRequiredResult`
//! defaults the tag). In the handshake era it drops those fields from a
//! result before reading it, but another host may not: so
//! [`Guard::on_input_required`] judges every result that carries
//! `inputRequests` or says `input_required`, in every revision.
//!
//! What rootfence does with an `input_required` result
//! ([`Guard::on_input_required`]):
//!
//! - `roots/list` input requests never reach the host: rootfence answers
//!   them with the enforced roots. A result that asks only for roots is
//!   retried by rootfence itself ([`InputPlan::Retry`]);
//! - `sampling/createMessage` and `elicitation/create` go through the same
//!   decisions as in the handshake era (rate limit, token clamp, content
//!   types, tools, context, form schema, sensitive terms, URL rules,
//!   audit); a refusal fails the host's request with `-32001` naming the
//!   rule;
//! - any other method, or a malformed input request, fails the host's
//!   request (fail closed);
//! - when the host must answer and rootfence has something to do with the
//!   answer (roots to fill in, a form to check, the host's own roots to
//!   learn), the result the host sees carries a `requestState` of
//!   rootfence's own (a token), under which the obligations are
//!   remembered; the host's retry ([`Guard::on_host_retry`]) is matched by
//!   that token and sent to the server with the server's own
//!   `requestState`, byte for byte.
//!
//! How rootfence learns the host's roots in this era: the host declares
//! `roots` in each request's `clientCapabilities` but can only be asked
//! inside a result. [`Guard::ask_host_roots`] makes a result that asks the
//! host for its roots only (answer to the host's first request that can
//! carry one: `tools/call`, `prompts/get`, `resources/read`); the host's
//! retry gives the roots ([`RetryPlan::Send::host_roots`]), the session
//! rebuilds the sandbox as after `roots/list` in the handshake era, and
//! the original request goes to the server. Later results that reach the
//! host anyway can carry the same question ([`InputContext::ask_host_roots`])
//! to notice a change.

use std::collections::HashMap;
use std::hash::{BuildHasher, Hasher};
use std::time::Instant;

use serde_json::{Map, Value, json};

use super::{AnswerCheck, Guard, Refusal, Revision, Verdict, shape_capabilities};
use crate::policy::{Policy, PolicyFile};
use crate::proxy::message;

/// `params._meta` key of a stateless request's client capabilities.
pub const META_CLIENT_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";

/// `params._meta` key of a stateless request's client information.
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";

/// The host requests whose result may be `input_required`.
pub const INPUT_REQUIRED_METHODS: &[&str] = &["tools/call", "prompts/get", "resources/read"];

/// The host request of the tasks extension (2026-07-28) whose result may
/// carry questions: a task in status `input_required` has
/// `inputRequests`, which the host answers with `tasks/update`
/// (`{taskId, inputResponses}`, no `requestState`): such results are
/// judged as `input_required` results are, what rootfence must do with the
/// answers remembered under the task's id.
pub const TASK_GET: &str = "tasks/get";

/// The host request of the tasks extension (2025-11-25 on) that fetches a
/// task's final result: the result of the request the task ran (a
/// `tools/call`, ...), so it may be `input_required` as that request's
/// own answer may, and is judged the same way.
pub const TASK_RESULT: &str = "tasks/result";

/// The host request that answers a task's questions.
pub const TASK_UPDATE: &str = "tasks/update";

/// Largest params of a handshake-era request kept for a retry
/// ([`InputContext::sent_params`]): in that era a server asks for roots
/// with `roots/list` itself, and keeping a copy of every large request
/// until it is answered would double the relay's memory.
pub const KEEP_PARAMS: usize = 64 << 10;

/// How many times in a row rootfence retries a request itself because the
/// server asked only for roots (the Python SDK's own cap on rounds is 10).
pub const MAX_OWN_ROUNDS: u32 = 10;

/// The input-request key under which rootfence asks the host for its
/// roots (another is picked if the server used it).
pub const HOST_ROOTS_KEY: &str = "io.rootfence/roots";

/// Prefix of the `requestState` tokens rootfence gives the host.
const TOKEN_PREFIX: &str = "rootfence-";

/// Most results awaiting the host's retry remembered at once (the oldest
/// is forgotten first; a retry under a forgotten token is refused).
const MAX_PENDING: usize = 1024;

/// The input-request methods the guard knows.
const ROOTS: &str = "roots/list";
const SAMPLING: &str = "sampling/createMessage";
const ELICITATION: &str = "elicitation/create";

/// A stateless request's `params` (raw JSON) with its
/// `_meta["io.modelcontextprotocol/clientCapabilities"]` shaped as
/// `initialize`'s capabilities are: `roots` set to `{}` (rootfence answers
/// the server's `roots/list` input requests itself, whatever the host
/// declared; 2026-07-28's roots capability has no members), then
/// [`shape_capabilities`] (sampling, elicitation and their tasks as the
/// policy allows). `None` when nothing changes (no such object, or
/// already shaped). Every other member of `params` and `_meta` keeps its
/// exact text.
///
/// # Security
///
/// The server is told of no capability the policy denies, in every
/// request (capabilities are per request in this era: the server "MUST
/// NOT infer capabilities from prior requests").
pub fn shape_meta_capabilities(params: &str, policy: &PolicyFile) -> Option<String> {
    let meta = message::member(params, "_meta")?;
    let caps_raw = message::member(meta, META_CLIENT_CAPABILITIES)?;
    let before: Value = serde_json::from_str(caps_raw).ok()?;
    let mut caps = match &before {
        Value::Object(m) => m.clone(),
        // Malformed: told nothing but the roots rootfence provides.
        _ => Map::new(),
    };
    caps.insert("roots".into(), json!({}));
    shape_capabilities(&mut caps, policy);
    let after = Value::Object(caps);
    if after == before {
        return None;
    }
    let meta = message::edit_members(
        meta,
        &[(META_CLIENT_CAPABILITIES, Some(&after.to_string()))],
    )?;
    message::edit_members(params, &[("_meta", Some(&meta))])
}

/// The host's client capabilities as declared in a stateless request's
/// `params` (raw JSON), for [`InputContext::host_caps`]; `Null` when
/// absent.
pub fn host_capabilities(params: &str) -> Value {
    message::member(params, "_meta")
        .and_then(|m| message::member(m, META_CLIENT_CAPABILITIES))
        .and_then(|c| serde_json::from_str(c).ok())
        .unwrap_or(Value::Null)
}

/// Whether a result (raw JSON) is one the guard must judge with
/// [`Guard::on_input_required`]: it says `"resultType":"input_required"`
/// or carries `inputRequests`.
///
/// One pass over the result, which skips every other member (tool results
/// can be megabytes). A result serde cannot read that way (a repeated
/// member, a `resultType` that is not a string) is judged: fail closed.
/// A result that is not an object carries no input requests.
pub fn needs_judging(result: &str) -> bool {
    #[derive(serde::Deserialize)]
    struct Peek<'a> {
        #[serde(rename = "resultType", default, borrow)]
        result_type: Option<std::borrow::Cow<'a, str>>,
        #[serde(rename = "inputRequests", default, borrow)]
        input_requests: Option<&'a serde_json::value::RawValue>,
    }
    // Only an object can carry input requests; the text of one that does
    // names them.
    if !result.trim_start().starts_with('{')
        || !(message::may_name(result, "resultType") || message::may_name(result, "inputRequests"))
    {
        return false;
    }
    // The fast scan when it is sure: a `resultType` that is not exactly
    // the string "input_required" in plain text is judged too, unless it
    // is another plain string (tool results can be megabytes; serde reads
    // them at a fraction of the scan's speed).
    let scan = crate::proxy::scan::member;
    if let (Some(rt), Some(ir)) = (
        scan(result.as_bytes(), b"resultType"),
        scan(result.as_bytes(), b"inputRequests"),
    ) {
        return guarded_needs_judging(rt, ir);
    }
    match serde_json::from_str::<Peek<'_>>(result) {
        Ok(p) => {
            p.result_type.as_deref() == Some("input_required")
                || p.input_requests.is_some_and(|v| v.get() != "null")
        }
        Err(_) => true,
    }
}

/// [`needs_judging`] from a result object's `resultType` and
/// `inputRequests` members (raw, each once at most), as the envelope's
/// pass found them: a `resultType` that is not exactly the string
/// "input_required" in plain text is judged too, unless it is another
/// plain string; `inputRequests` other than `null` is judged.
pub fn guarded_needs_judging(result_type: Option<&[u8]>, input_requests: Option<&[u8]>) -> bool {
    let plain_other = |v: &[u8]| {
        v.len() >= 2 && v[0] == b'"' && !v.contains(&b'\\') && v != b"\"input_required\""
    };
    result_type.is_some_and(|v| !plain_other(v)) || input_requests.is_some_and(|v| v != b"null")
}

/// What the guard needs to judge one `input_required` result.
#[derive(Debug, Clone, Copy)]
pub struct InputContext<'a> {
    /// The policy in force.
    pub policy: &'a Policy,
    /// The revision of the host's request (its `_meta` protocol version,
    /// or the negotiated handshake revision).
    pub revision: Revision,
    /// The host's client capabilities as the host declared them for this
    /// request ([`host_capabilities`], or `initialize`'s).
    pub host_caps: &'a Value,
    /// The server generation that answered.
    pub generation: u64,
    /// The host request's method (`tools/call`, ...).
    pub method: &'a str,
    /// The params the request was sent to the server with (raw JSON): the
    /// base of rootfence's own retry. `None` when they were not kept (a
    /// large request of the handshake era, see [`KEEP_PARAMS`]): a result
    /// asking only for roots is then refused.
    pub sent_params: Option<&'a str>,
    /// The enforced roots as a `roots/list` result: `{"roots":[{uri,name}]}`.
    pub roots: &'a Value,
    /// How many times in a row rootfence already retried this request
    /// itself ([`InputPlan::Retry`]).
    pub own_rounds: u32,
    /// Ask the host for its roots too, if the result goes to the host
    /// anyway (the host declared `roots`).
    pub ask_host_roots: bool,
}

/// What the session does with an `input_required` result.
#[derive(Debug, Clone, PartialEq)]
pub enum InputPlan {
    /// Relay the server's line to the host as it is.
    Relay,
    /// Relay with this result (raw JSON) instead of the server's.
    ToHost(String),
    /// The server asked only for roots: send the same method to the server
    /// again, with rootfence's own id and these params (the sent params
    /// with `inputResponses` and the server's `requestState`), and answer
    /// the host's request with the final result. Count the round.
    Retry(String),
    /// Answer the host's request with this error; nothing reaches the
    /// host, and nothing is sent to the server on the host's behalf.
    Refuse(Refusal),
    /// A task (`tasks/get`) asked only for roots: send the server these
    /// `tasks/update` params (raw JSON: the task's id and the enforced
    /// roots), then the host's `tasks/get` again under rootfence's own id,
    /// whose answer goes to the host. Count the round.
    TaskRoots(String),
}

/// What the session does with a host request that may be a retry.
#[derive(Debug, Clone, PartialEq)]
pub enum RetryPlan {
    /// Not a retry of a result rootfence changed: send as it is.
    Unchanged,
    /// Send these params (raw JSON) instead.
    Send {
        /// The params for the server: the host's, with the roots answers
        /// filled in, rootfence's own answers removed, the server's
        /// `requestState`.
        params: String,
        /// The host's roots, when rootfence asked for them: a `roots/list`
        /// result. Rebuild as after the handshake era's `roots/list`.
        host_roots: Option<Value>,
        /// The `inputResponses` keys filled in with the enforced roots:
        /// when `host_roots` changes the target, the session fills them in
        /// again with the roots of the generation the request goes to.
        roots_keys: Vec<String>,
    },
    /// Answer the host's request with this error; the server sees nothing.
    Refuse(Refusal),
}

/// What rootfence must do with the host's retry of one result.
#[derive(Debug, Clone)]
pub(super) struct Pending {
    /// The request's method: the retry must be the same.
    method: String,
    /// The server's `requestState` (raw JSON string), byte for byte.
    server_state: Option<String>,
    /// Keys rootfence answers with the enforced roots.
    roots_keys: Vec<String>,
    /// Elicitation keys whose answers are checked before the server sees
    /// them.
    forms: Vec<(String, AnswerCheck)>,
    /// The key of rootfence's own `roots/list` to the host.
    host_roots_key: Option<String>,
}

/// The tokens given to the host and what each stands for.
#[derive(Debug, Default)]
pub(super) struct PendingInputs {
    map: HashMap<String, Pending>,
    order: std::collections::VecDeque<String>,
    seed: std::hash::RandomState,
    counter: u64,
}

impl PendingInputs {
    /// Remember `p`; the token to give the host as `requestState`.
    fn insert(&mut self, p: Pending) -> String {
        self.counter += 1;
        // Two keyed hashes (SipHash, keys from the OS's randomness) of a
        // counter: unpredictable, never repeated in a session.
        let mut a = self.seed.build_hasher();
        a.write_u64(self.counter);
        let mut b = self.seed.build_hasher();
        b.write_u64(!self.counter);
        let token = format!("{TOKEN_PREFIX}{:016x}{:016x}", a.finish(), b.finish());
        self.map.insert(token.clone(), p);
        self.order.push_back(token.clone());
        while self.order.len() > MAX_PENDING {
            if let Some(old) = self.order.pop_front() {
                self.map.remove(&old);
            }
        }
        token
    }

    /// Remember `p` for the task `id` (answered by `tasks/update`).
    fn insert_task(&mut self, id: &str, p: Pending) {
        let key = format!("task:{id}");
        if self.map.insert(key.clone(), p).is_none() {
            self.order.push_back(key);
        }
        while self.order.len() > MAX_PENDING {
            if let Some(old) = self.order.pop_front() {
                self.map.remove(&old);
            }
        }
    }

    fn take(&mut self, token: &str) -> Option<Pending> {
        let p = self.map.remove(token)?;
        self.order.retain(|t| t != token);
        Some(p)
    }
}

/// An input request the guard understood.
enum Input {
    Roots,
    Sampling(Value, usize),
    Elicitation(Value),
}

/// An `input_required` result as read, before any decision.
struct ReadResult {
    /// The task it is about (`tasks/get`).
    task: Option<String>,
    /// The server's `requestState`, as it wrote it.
    server_state: Option<String>,
    /// Its input requests, as they came.
    requests: Map<String, Value>,
    /// Each input request's kind.
    inputs: Vec<(String, Input)>,
    /// Its `requestState` looks like a token of rootfence's.
    looks_ours: bool,
}

/// The guard's decisions on a result's input requests.
#[derive(Default)]
struct Decided {
    /// What the host is asked (judged, sampling maybe clamped).
    to_host: Map<String, Value>,
    /// The keys of `roots/list` questions, answered by rootfence.
    roots_keys: Vec<String>,
    /// The forms whose answers are checked.
    forms: Vec<(String, AnswerCheck)>,
    /// The input requests the host sees differ from the server's.
    changed: bool,
}

/// A result that asks only for roots: rootfence answers them and sends the
/// request again itself (or updates the task), at most
/// [`MAX_OWN_ROUNDS`] times in a row.
fn roots_only(ctx: InputContext<'_>, read: &ReadResult, roots_keys: &[String]) -> InputPlan {
    if ctx.own_rounds >= MAX_OWN_ROUNDS {
        return InputPlan::Refuse(Refusal::policy(
            "stateless.roots_rounds",
            &format!(
                "rootfence answers the server's roots {MAX_OWN_ROUNDS} times in a row at most"
            ),
            "the server kept asking for roots; it may be looping",
        ));
    }
    let responses: Map<String, Value> = roots_keys
        .iter()
        .map(|k| (k.clone(), ctx.roots.clone()))
        .collect();
    if let Some(t) = &read.task {
        let update = json!({"taskId": t, "inputResponses": responses});
        return InputPlan::TaskRoots(update.to_string());
    }
    let Some(sent) = ctx.sent_params else {
        return InputPlan::Refuse(refuse_input(&format!(
            "the server answered a request of the handshake era over {} KiB with an input_required result asking for roots; rootfence answers those only for smaller requests (in this era the server asks with roots/list)",
            KEEP_PARAMS >> 10
        )));
    };
    match retry_params(
        sent,
        Some(&Value::Object(responses).to_string()),
        read.server_state.as_deref(),
    ) {
        Some(params) => InputPlan::Retry(params),
        None => InputPlan::Refuse(refuse_input("the request's params are not an object")),
    }
}

fn refuse_input(detail: &str) -> Refusal {
    Refusal::policy(
        "stateless.input_request",
        "input requests the guard cannot judge are refused",
        detail,
    )
}

impl Guard {
    /// Judge a result (raw JSON) that [`needs_judging`], answering the
    /// host's request `ctx.method`, at `now`. Every sampling and
    /// elicitation decision is audited.
    ///
    /// # Security
    ///
    /// No `roots/list` input request reaches the host; no sampling or
    /// elicitation input request reaches it without the guard's decision;
    /// an input request the guard does not understand fails the host's
    /// request instead of being relayed.
    pub fn on_input_required(
        &mut self,
        ctx: InputContext<'_>,
        result: &str,
        now: Instant,
    ) -> InputPlan {
        let read = match self.read_input_result(ctx, result) {
            Ok(r) => r,
            Err(plan) => return plan,
        };
        let decided = match self.decide_inputs(ctx, &read, now) {
            Ok(d) => d,
            Err(plan) => return plan,
        };
        if !decided.roots_keys.is_empty() && decided.to_host.is_empty() {
            // Only roots: rootfence answers and retries itself.
            return roots_only(ctx, &read, &decided.roots_keys);
        }
        self.result_for_host(ctx, result, read, decided)
    }

    /// A result's `taskId` (for `tasks/get`), `requestState` and input
    /// requests, each of a method the guard knows; nothing judged yet.
    fn read_input_result(
        &mut self,
        ctx: InputContext<'_>,
        result: &str,
    ) -> Result<ReadResult, InputPlan> {
        let mut refuse =
            |what: &str, why: &str| Err(self.refuse_input(ctx, what, &refuse_input(why)));
        let parsed: Value = match serde_json::from_str(result) {
            Ok(Value::Object(m)) => Value::Object(m),
            _ => return refuse("?", "the result is not a JSON object"),
        };
        let task = if ctx.method == TASK_GET {
            match parsed.get("taskId").and_then(Value::as_str) {
                Some(t) if t.len() <= super::MAX_KEPT_ID => Some(t.to_string()),
                _ => return refuse("?", "a task with questions needs a taskId string"),
            }
        } else {
            None
        };
        let server_state = match parsed.get("requestState") {
            None | Some(Value::Null) => None,
            Some(Value::String(_)) => message::member(result, "requestState").map(str::to_string),
            Some(_) => return refuse("?", "requestState is not a string"),
        };
        let requests = match parsed.get("inputRequests") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(_) => return refuse("?", "inputRequests is not an object"),
        };
        let mut inputs: Vec<(String, Input)> = Vec::with_capacity(requests.len());
        for (key, req) in &requests {
            let method = req.get("method").and_then(Value::as_str);
            let params = req.get("params").cloned().unwrap_or(Value::Null);
            let input = match method {
                Some(ROOTS) => Input::Roots,
                Some(SAMPLING) => Input::Sampling(params, req.to_string().len()),
                Some(ELICITATION) => Input::Elicitation(params),
                Some(other) => {
                    return refuse(
                        other,
                        &format!(
                            "the server asked the host for {other:?} (input request {key:?}), a method the guard does not know"
                        ),
                    );
                }
                None => return refuse("?", &format!("input request {key:?} has no method")),
            };
            inputs.push((key.clone(), input));
        }
        // A server state that looks like rootfence's token is wrapped too,
        // so that every such token the host echoes is one rootfence made.
        let looks_ours = parsed
            .get("requestState")
            .and_then(Value::as_str)
            .is_some_and(|st| st.starts_with(TOKEN_PREFIX));
        Ok(ReadResult {
            task,
            server_state,
            requests,
            inputs,
            looks_ours,
        })
    }

    /// The guard's decisions on each input request: forms first, sampling
    /// (which charges the rate limit) last; roots set aside for rootfence.
    fn decide_inputs(
        &mut self,
        ctx: InputContext<'_>,
        read: &ReadResult,
        now: Instant,
    ) -> Result<Decided, InputPlan> {
        let gctx = super::Context {
            policy: ctx.policy,
            revision: ctx.revision,
            host_caps: ctx.host_caps,
            generation: ctx.generation,
        };
        let mut d = Decided::default();
        for (key, input) in &read.inputs {
            if let Input::Elicitation(params) = input {
                match self.judge(gctx, ELICITATION, params, 0, now, key) {
                    Verdict::Refuse(r) => return Err(InputPlan::Refuse(r)),
                    Verdict::Forward { check, .. } => {
                        if let Some(c) = check {
                            d.forms.push((key.clone(), c));
                        }
                        d.to_host.insert(key.clone(), read.requests[key].clone());
                    }
                }
            }
        }
        for (key, input) in &read.inputs {
            match input {
                Input::Roots => {
                    d.roots_keys.push(key.clone());
                    d.changed = true;
                }
                Input::Sampling(params, bytes) => {
                    match self.judge(gctx, SAMPLING, params, *bytes, now, key) {
                        Verdict::Refuse(r) => return Err(InputPlan::Refuse(r)),
                        Verdict::Forward { params: p, .. } => {
                            let mut req = read.requests[key].clone();
                            if let (Some(p), Some(o)) = (p, req.as_object_mut()) {
                                o.insert("params".into(), p);
                                d.changed = true;
                            }
                            d.to_host.insert(key.clone(), req);
                        }
                    }
                }
                Input::Elicitation(_) => {}
            }
        }
        Ok(d)
    }

    /// The result the host gets: the questions it may answer (with its own
    /// roots asked too when wanted), under a token of rootfence's when it
    /// must recognize the retry.
    fn result_for_host(
        &mut self,
        ctx: InputContext<'_>,
        result: &str,
        read: ReadResult,
        mut d: Decided,
    ) -> InputPlan {
        let mut host_roots_key = None;
        if ctx.ask_host_roots && !d.to_host.is_empty() {
            let key = free_key(&read.requests);
            d.to_host.insert(key.clone(), json!({"method": ROOTS}));
            host_roots_key = Some(key);
            d.changed = true;
        }
        let remember = !d.roots_keys.is_empty()
            || !d.forms.is_empty()
            || host_roots_key.is_some()
            || read.looks_ours;
        if !remember && !d.changed {
            return InputPlan::Relay;
        }
        let mut edits: Vec<(&str, Option<String>)> = Vec::new();
        if d.changed {
            edits.push(("inputRequests", Some(Value::Object(d.to_host).to_string())));
        }
        if remember {
            let pending = Pending {
                method: ctx.method.to_string(),
                server_state: read.server_state,
                roots_keys: d.roots_keys,
                forms: d.forms,
                host_roots_key,
            };
            match &read.task {
                // Answered by `tasks/update`, which names the task.
                Some(t) => self.pending.insert_task(t, pending),
                None => {
                    let token = self.pending.insert(pending);
                    edits.push(("requestState", Some(Value::String(token).to_string())));
                }
            }
        }
        let edits: Vec<(&str, Option<&str>)> =
            edits.iter().map(|(k, v)| (*k, v.as_deref())).collect();
        match message::edit_members(result, &edits) {
            Some(r) => InputPlan::ToHost(r),
            None => InputPlan::Refuse(refuse_input("the result is not a JSON object")),
        }
    }

    /// A result for the host's request that asks only for the host's roots
    /// (rootfence's own input request, nothing from the server): answer
    /// the host's first `tools/call`, `prompts/get` or `resources/read`
    /// with it when the host declared `roots` and rootfence does not know
    /// them yet. The host's retry ([`Guard::on_host_retry`]) gives the roots
    /// and the original params.
    pub fn ask_host_roots(&mut self, method: &str) -> String {
        let token = self.pending.insert(Pending {
            method: method.to_string(),
            server_state: None,
            roots_keys: Vec::new(),
            forms: Vec::new(),
            host_roots_key: Some(HOST_ROOTS_KEY.to_string()),
        });
        json!({
            "resultType": "input_required",
            "inputRequests": {HOST_ROOTS_KEY: {"method": ROOTS}},
            "requestState": token,
        })
        .to_string()
    }

    /// The host sent `method` with `params` (raw JSON): if it retries a
    /// result rootfence changed (its `requestState` is rootfence's token),
    /// the params for the server: the enforced `roots` filled in for the
    /// server's `roots/list` keys, the host's answers to forms checked
    /// (audited), rootfence's own question removed (its answer returned
    /// as the host's roots), and the server's own `requestState` (or
    /// none) restored.
    ///
    /// # Security
    ///
    /// The server sees no answer the form did not ask for, and learns no
    /// roots but the enforced ones.
    pub fn on_host_retry(&mut self, method: &str, params: &str, roots: &Value) -> RetryPlan {
        let Some(state_raw) = message::member(params, "requestState") else {
            return RetryPlan::Unchanged;
        };
        let Ok(state) = serde_json::from_str::<String>(state_raw) else {
            return RetryPlan::Unchanged;
        };
        if !state.starts_with(TOKEN_PREFIX) {
            return RetryPlan::Unchanged;
        }
        let Some(p) = self.pending.take(&state) else {
            return RetryPlan::Refuse(Refusal::malformed(
                "stateless.request_state",
                "this requestState was issued by rootfence and is no longer known (already used, or forgotten); send the request again without inputResponses and requestState",
            ));
        };
        if p.method != method {
            return RetryPlan::Refuse(Refusal::malformed(
                "stateless.request_state",
                &format!(
                    "this requestState belongs to a {} request, not {method}",
                    p.method
                ),
            ));
        }
        let mut responses = match self.answers(params, &p, "stateless.request_state") {
            Ok(r) => r,
            Err(r) => return RetryPlan::Refuse(r),
        };
        let host_roots = p.host_roots_key.as_ref().and_then(|k| responses.remove(k));
        for k in &p.roots_keys {
            responses.insert(k.clone(), roots.clone());
        }
        let responses = (!responses.is_empty()).then(|| Value::Object(responses).to_string());
        match retry_params(params, responses.as_deref(), p.server_state.as_deref()) {
            Some(params) => RetryPlan::Send {
                params,
                host_roots,
                roots_keys: p.roots_keys,
            },
            None => RetryPlan::Refuse(Refusal::malformed(
                "stateless.request_state",
                "params must be an object",
            )),
        }
    }

    /// The host's `inputResponses` in `params`, each answer to a form
    /// checked against the form asked (`rule` names a malformed list).
    fn answers(
        &mut self,
        params: &str,
        p: &Pending,
        rule: &'static str,
    ) -> Result<Map<String, Value>, Refusal> {
        let responses = match message::member(params, "inputResponses")
            .map(serde_json::from_str::<Value>)
        {
            None | Some(Ok(Value::Null)) => Map::new(),
            Some(Ok(Value::Object(m))) => m,
            Some(_) => return Err(Refusal::malformed(rule, "inputResponses must be an object")),
        };
        for (key, check) in &p.forms {
            if let Some(answer) = responses.get(key) {
                self.on_answer(check, Some(answer))?;
            }
        }
        Ok(responses)
    }

    /// The host answers a task's questions (`tasks/update` with `params`,
    /// raw JSON): the params for the server, with the enforced roots
    /// filled in for the server's `roots/list` keys and the host's
    /// answers to forms checked. Answers to questions rootfence did not
    /// show the host (a task whose `tasks/get` it never judged) are
    /// refused.
    ///
    /// # Security
    ///
    /// As [`Guard::on_host_retry`]: the server sees no answer the form did
    /// not ask for, and learns no roots but the enforced ones.
    pub fn on_task_update(&mut self, params: &str, roots: &Value) -> RetryPlan {
        let task =
            message::member(params, "taskId").and_then(|t| serde_json::from_str::<String>(t).ok());
        let Some(task) = task else {
            return RetryPlan::Refuse(Refusal::malformed(
                "stateless.task",
                "tasks/update needs a taskId string",
            ));
        };
        let Some(p) = self.pending.take(&format!("task:{task}")) else {
            let answers = message::member(params, "inputResponses")
                .is_some_and(|r| !matches!(r, "null" | "{}"));
            if !answers {
                return RetryPlan::Unchanged;
            }
            return RetryPlan::Refuse(Refusal::malformed(
                "stateless.task",
                "rootfence showed no questions of this task to the host (or they were answered already): fetch them with tasks/get",
            ));
        };
        let mut responses = match self.answers(params, &p, "stateless.task") {
            Ok(r) => r,
            Err(r) => return RetryPlan::Refuse(r),
        };
        for k in &p.roots_keys {
            responses.insert(k.clone(), roots.clone());
        }
        let responses = Value::Object(responses).to_string();
        match message::edit_members(params, &[("inputResponses", Some(&responses))]) {
            Some(params) => RetryPlan::Send {
                params,
                host_roots: None,
                roots_keys: p.roots_keys,
            },
            None => RetryPlan::Refuse(Refusal::malformed(
                "stateless.task",
                "params must be an object",
            )),
        }
    }

    /// Record a refused input request and return the plan.
    /// Audit `r`, the refusal of an `input_required` result in the answer
    /// to a request that cannot carry one.
    pub fn audit_refused_input(&mut self, generation: u64, r: &Refusal) {
        self.refused(generation, "?", "via=input_required", r);
    }

    fn refuse_input(&mut self, ctx: InputContext<'_>, method: &str, r: &Refusal) -> InputPlan {
        let method: String = method.chars().take(100).collect();
        self.refused(ctx.generation, &method, "via=input_required", r);
        InputPlan::Refuse(r.clone())
    }
}

/// `params` (raw JSON) with `inputResponses` and `requestState` set to the
/// given raw JSON (removed when `None`).
fn retry_params(params: &str, responses: Option<&str>, state: Option<&str>) -> Option<String> {
    message::edit_members(
        params,
        &[("inputResponses", responses), ("requestState", state)],
    )
}

/// [`HOST_ROOTS_KEY`], or a variant of it the server did not use.
fn free_key(requests: &Map<String, Value>) -> String {
    let mut key = HOST_ROOTS_KEY.to_string();
    let mut n = 1;
    while requests.contains_key(&key) {
        n += 1;
        key = format!("{HOST_ROOTS_KEY}-{n}");
    }
    key
}

#[cfg(test)]
mod tests;
