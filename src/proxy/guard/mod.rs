//! The sampling and elicitation guard: what the policy's `[sampling]` and
//! `[elicitation]` sections allow the server to ask of the host.
//!
//! - [`shape_capabilities`]: a feature the policy denies is not advertised
//!   to the server in the `initialize` rootfence forwards and replays;
//! - [`sampling`]: the decision on `sampling/createMessage` and the rate
//!   limiter;
//! - [`elicitation`]: the decision on `elicitation/create`, the restricted
//!   form schema of each revision, the check of the host's answer;
//! - [`sensitive`]: the sensitive-term detector for forms;
//! - [`url`]: the URL check for URL-mode elicitation;
//! - [`audit`]: the audit trail;
//! - [`route`]: which server messages the guard must see (by method,
//!   whatever the message's shape);
//! - [`stateless`]: the 2026-07-28 era: capabilities in each request's
//!   `_meta`, `input_required` results judged, the host's retries;
//! - [`version`]: protocol versions the guard does not know are never
//!   offered.
//!
//! The decisions are pure functions; [`Guard`] is the session-owned state
//! (rate limiter, audit file, task-augmented elicitations awaiting their
//! result) and the one entry point the session calls. A refusal is a
//! JSON-RPC error to the server, code [`POLICY_REFUSED`] (-32001) for a
//! policy rule and -32602 for a request too malformed to judge, with the
//! rule's id in `error.data.rule`; the host never sees the request.

pub(crate) use crate::audit;
pub mod elicitation;
pub mod route;
pub mod sampling;
pub mod sensitive;
pub mod stateless;
pub mod url;
pub mod version;

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::time::Instant;

use serde_json::{Map, Value};

use self::audit::{AuditLog, Decision, Record};
use self::elicitation::{ElicitDecision, FormSchema};
use self::sampling::{RateLimiter, SamplingDecision, SamplingRequest};
use super::message::code;
use crate::policy::{Policy, PolicyFile};

/// The JSON-RPC error code of a policy refusal.
pub const POLICY_REFUSED: i64 = code::POLICY_REFUSED;

/// The methods the guard judges (server → host requests): the questions,
/// and the requests that name a task the host runs for one of them.
pub const GUARDED: &[&str] = &[
    "sampling/createMessage",
    "elicitation/create",
    "tasks/result",
    "tasks/get",
    "tasks/cancel",
];

/// A protocol revision, as far as the guard cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Revision {
    /// 2024-11-05
    V2024_11_05,
    /// 2025-03-26
    V2025_03_26,
    /// 2025-06-18: elicitation appears.
    V2025_06_18,
    /// 2025-11-25: URL mode, richer forms, sampling with tools, tasks.
    V2025_11_25,
    /// 2026-07-28 and later (the stateless era).
    V2026_07_28,
}

impl Revision {
    /// The revision a version string names; an unknown date counts as the
    /// latest revision before it.
    pub fn parse(v: &str) -> Revision {
        if v >= "2026-07-28" {
            Revision::V2026_07_28
        } else if v >= "2025-11-25" {
            Revision::V2025_11_25
        } else if v >= "2025-06-18" {
            Revision::V2025_06_18
        } else if v >= "2025-03-26" {
            Revision::V2025_03_26
        } else {
            Revision::V2024_11_05
        }
    }
}

impl fmt::Display for Revision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Revision::V2024_11_05 => "2024-11-05",
            Revision::V2025_03_26 => "2025-03-26",
            Revision::V2025_06_18 => "2025-06-18",
            Revision::V2025_11_25 => "2025-11-25",
            Revision::V2026_07_28 => "2026-07-28",
        })
    }
}

/// Why the guard refused a request: the error the server receives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The rule's id (`sampling.max_tokens`, `elicitation.schema`, ...).
    pub rule: &'static str,
    /// JSON-RPC error code.
    pub code: i64,
    /// The error message: `rootfence policy: <setting> (<detail>)`.
    pub message: String,
}

impl Refusal {
    /// A policy rule refuses: `rootfence policy: {setting} ({detail})`.
    pub fn policy(rule: &'static str, setting: &str, detail: &str) -> Refusal {
        Refusal {
            rule,
            code: POLICY_REFUSED,
            message: format!("rootfence policy: {setting} ({detail})"),
        }
    }

    /// The request is too malformed to judge (-32602).
    pub fn malformed(rule: &'static str, detail: &str) -> Refusal {
        Refusal {
            rule,
            code: code::INVALID_PARAMS,
            message: format!("rootfence: invalid params: {detail}"),
        }
    }

    /// The JSON-RPC error response to the server's request `id_raw`.
    pub fn response(&self, id_raw: &str) -> Vec<u8> {
        let data = serde_json::json!({"rule": self.rule, "by": "rootfence"});
        super::message::error_response_with_data(Some(id_raw), self.code, &self.message, &data)
    }
}

/// Remove from `caps` (the host's client capabilities, as forwarded to the
/// server) what the policy denies:
/// - `sampling` when `sampling.allow = false`; else `sampling.tools` unless
///   `allow_tools`, and `sampling.context` unless `allow_include_context`;
/// - `elicitation` when `elicitation.allow = false`; else the `form` / `url`
///   sub-capabilities the policy denies (an empty `elicitation` object means
///   form only), and the whole capability when nothing allowed is left;
/// - `tasks.requests.sampling` / `tasks.requests.elicitation` with their
///   feature.
pub fn shape_capabilities(caps: &mut Map<String, Value>, policy: &PolicyFile) {
    let s = &policy.sampling;
    let mut drop_sampling = !s.allow;
    if let Some(Value::Object(sc)) = caps.get_mut("sampling") {
        if !s.allow_tools {
            sc.remove("tools");
        }
        if !s.allow_include_context {
            sc.remove("context");
        }
    } else if caps.get("sampling").is_some_and(|v| !v.is_object()) {
        drop_sampling = true;
    }
    if drop_sampling {
        caps.remove("sampling");
    }
    let e = &policy.elicitation;
    let mut drop_elicitation = !e.allow;
    if !drop_elicitation && let Some(ec) = caps.get_mut("elicitation") {
        match ec {
            Value::Object(m) if m.contains_key("form") || m.contains_key("url") => {
                if !e.form {
                    m.remove("form");
                }
                if !e.url {
                    m.remove("url");
                }
                drop_elicitation = !m.contains_key("form") && !m.contains_key("url");
            }
            // `{}`: form only.
            Value::Object(_) => drop_elicitation = !e.form,
            _ => drop_elicitation = true,
        }
    }
    if drop_elicitation {
        caps.remove("elicitation");
    }
    if let Some(Value::Object(req)) = caps.get_mut("tasks").and_then(|t| t.get_mut("requests")) {
        if drop_sampling {
            req.remove("sampling");
        }
        if drop_elicitation {
            req.remove("elicitation");
        }
    }
}

/// What the session should do with a guarded server request.
#[derive(Debug)]
pub enum Verdict {
    /// Forward it to the host; with `params`, rewritten (a clamp); check
    /// the host's answer with `check`.
    Forward {
        /// Replacement params.
        params: Option<Value>,
        /// Remember this with the request: the host's answer is checked
        /// against it.
        check: Option<AnswerCheck>,
    },
    /// Answer the server with this error; the host never sees the request.
    Refuse(Refusal),
}

/// How to check the host's answer to a forwarded request.
#[derive(Debug, Clone)]
pub struct AnswerCheck {
    generation: u64,
    method: &'static str,
    /// The form the answer must match (elicitation, with
    /// `validate_response`).
    schema: Option<FormSchema>,
    /// Task-augmented: the first answer may be a `CreateTaskResult`.
    task: bool,
    /// For `tasks/result` and `tasks/cancel`: the task, forgotten once
    /// its result was given or it was cancelled.
    task_id: Option<String>,
}

/// The facts about the session the guard's decisions depend on.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// The policy in force.
    pub policy: &'a Policy,
    /// The negotiated protocol revision.
    pub revision: Revision,
    /// The host's client capabilities (as the host declared them).
    pub host_caps: &'a Value,
    /// The server generation that sent the request.
    pub generation: u64,
}

/// Most tasks the host runs for the server's questions remembered at once:
/// past it, a task-augmented question is refused (nothing is forgotten to
/// make room: a task forgotten would be a `tasks/result` unchecked).
const MAX_TASKS: usize = 1024;

/// Most URL elicitations awaiting their `notifications/elicitation/complete`
/// remembered at once: past it, a URL elicitation is refused.
const MAX_URL_ELICITATIONS: usize = 1024;

/// Longest task or elicitation id remembered; a longer one is refused.
pub const MAX_KEPT_ID: usize = 256;

/// The guard's session state: survives server rebuilds.
#[derive(Debug, Default)]
pub struct Guard {
    limiter: RateLimiter,
    audit: AuditLog,
    /// Tasks the host runs for the server's task-augmented questions:
    /// task id (the host's, unique in the session) → the form their
    /// result must match, if any. At most [`MAX_TASKS`]; a task is
    /// forgotten once its result was given or it was cancelled, and a
    /// request naming a task not here is refused.
    tasks: HashMap<String, Option<FormSchema>>,
    /// URL elicitations forwarded (by generation and elicitation id): the
    /// server may announce their completion.
    url_elicitations: HashSet<(u64, String)>,
    /// `input_required` results awaiting the host's retry, by the token
    /// rootfence gave the host as `requestState`.
    pending: stateless::PendingInputs,
}

impl Guard {
    /// A guard for `policy`: opens its audit file (a failure is a warning).
    pub fn new(policy: &Policy) -> Guard {
        let mut g = Guard::default();
        g.open_audit(policy);
        g
    }

    /// The policy changed: reopen the audit file if it moved. The rate
    /// limiter keeps its state (the new rate applies from now).
    pub fn policy_changed(&mut self, policy: &Policy) {
        if self.audit.path() != policy.audit_file.as_deref() {
            self.open_audit(policy);
        }
    }

    fn open_audit(&mut self, policy: &Policy) {
        self.audit = match &policy.audit_file {
            None => AuditLog::tracing_only(),
            Some(path) => AuditLog::to_file(path, "audit records"),
        };
    }

    /// Judge a server → host request (`method` in [`GUARDED`]) whose line is
    /// `bytes` long, at `now`.
    pub fn on_request(
        &mut self,
        ctx: Context<'_>,
        method: &str,
        params: &Value,
        bytes: usize,
        now: Instant,
    ) -> Verdict {
        self.judge(ctx, method, params, bytes, now, "")
    }

    /// The server sent `method`, a server → host request method, as a
    /// notification ([`route::ServerRoute::Drop`]): record that it was
    /// dropped.
    pub fn on_dropped_notification(&mut self, generation: u64, method: &str) {
        self.record(
            generation,
            method,
            Decision::Refused,
            Some("guard.notification"),
            "sent as a notification",
            Some("a server -> host request without an id cannot be judged and answered: dropped"),
        );
    }

    /// The server sent `method`, a server → host request method, as a
    /// member of a batch in a revision without batches (the whole batch is
    /// refused): record that it was dropped.
    pub fn on_dropped_batch_member(&mut self, generation: u64, method: &str) {
        self.record(
            generation,
            method,
            Decision::Refused,
            Some("guard.batch"),
            "sent in a batch",
            Some("batches exist only in protocol 2025-03-26: the batch was refused whole"),
        );
    }

    /// [`Guard::on_request`] for a request that came as `via` (`""` for a
    /// JSON-RPC request, else the input-request key of an
    /// `input_required` result).
    fn judge(
        &mut self,
        ctx: Context<'_>,
        method: &str,
        params: &Value,
        bytes: usize,
        now: Instant,
        via: &str,
    ) -> Verdict {
        let via = if via.is_empty() {
            ""
        } else {
            " via=input_required"
        };
        match method {
            "sampling/createMessage" => self.on_sampling(ctx, params, bytes, now, via),
            "elicitation/create" => self.on_elicitation(ctx, params, via),
            "tasks/result" | "tasks/get" | "tasks/cancel" => {
                self.on_task_request(ctx, method, params)
            }
            _ => Verdict::Forward {
                params: None,
                check: None,
            },
        }
    }

    /// A server's `tasks/result`, `tasks/get` or `tasks/cancel` to the
    /// host: only for a task the host runs for one of this session's
    /// questions; the result is checked against its form.
    fn on_task_request(&mut self, ctx: Context<'_>, method: &str, params: &Value) -> Verdict {
        let id = params.get("taskId").and_then(Value::as_str);
        let known = id.and_then(|t| self.tasks.get(t).map(|s| (t.to_string(), s.clone())));
        let Some((task_id, schema)) = known else {
            let r = Refusal::malformed(
                "guard.tasks",
                &format!(
                    "{method} names no task the host runs for this server's questions (taskId {})",
                    id.map_or("missing".to_string(), |t| format!(
                        "{:?}",
                        t.chars().take(64).collect::<String>()
                    ))
                ),
            );
            self.refused(ctx.generation, method, "task", &r);
            return Verdict::Refuse(r);
        };
        let method = match method {
            "tasks/result" => "tasks/result",
            "tasks/cancel" => "tasks/cancel",
            _ => "tasks/get",
        };
        Verdict::Forward {
            params: None,
            check: (method != "tasks/get").then_some(AnswerCheck {
                generation: ctx.generation,
                method,
                schema,
                task: false,
                task_id: Some(task_id),
            }),
        }
    }

    /// Whether a question is task-augmented; a refusal when the task
    /// table is full.
    fn task_room(
        &mut self,
        ctx: Context<'_>,
        method: &str,
        params: &Value,
    ) -> Result<bool, Refusal> {
        if params.get("task").is_none_or(Value::is_null) {
            return Ok(false);
        }
        if self.tasks.len() >= MAX_TASKS {
            let r = Refusal::policy(
                "guard.tasks",
                &format!("rootfence follows at most {MAX_TASKS} tasks at once"),
                "send the question without task augmentation, or wait for tasks to finish",
            );
            self.refused(ctx.generation, method, "task", &r);
            return Err(r);
        }
        Ok(true)
    }

    /// Generation `g` exited: its URL elicitations can no longer complete.
    pub fn generation_gone(&mut self, g: u64) {
        self.url_elicitations.retain(|(gen_, _)| *gen_ != g);
    }

    /// The server `g` says its URL elicitation `id` is complete: true once
    /// for each URL elicitation of `g` forwarded to the host.
    pub fn url_elicitation_done(&mut self, g: u64, id: &str) -> bool {
        self.url_elicitations.remove(&(g, id.to_string()))
    }

    /// Remember a URL elicitation of `g` forwarded to the host; a refusal
    /// when its id is missing or too long, or the table is full.
    fn remember_url(&mut self, g: u64, params: &Value) -> Result<(), Refusal> {
        let Some(id) = params.get("elicitationId").and_then(Value::as_str) else {
            return Err(Refusal::malformed(
                "elicitation.request",
                "a URL-mode elicitation needs an elicitationId string",
            ));
        };
        if id.len() > MAX_KEPT_ID {
            return Err(Refusal::malformed(
                "elicitation.request",
                &format!("elicitationId is longer than {MAX_KEPT_ID} bytes"),
            ));
        }
        if self.url_elicitations.len() >= MAX_URL_ELICITATIONS {
            return Err(Refusal::policy(
                "elicitation.url",
                &format!(
                    "rootfence follows at most {MAX_URL_ELICITATIONS} URL elicitations at once"
                ),
                "wait for earlier ones to complete",
            ));
        }
        self.url_elicitations.insert((g, id.to_string()));
        Ok(())
    }

    /// Judge a `-32042` error (URL elicitation required, 2025-11-25) of
    /// the server to a host request: every entry of `data.elicitations` is
    /// judged as a URL-mode `elicitation/create` (the policy's URL rules,
    /// the host's declared capability, the revision), and remembered for
    /// its `notifications/elicitation/complete`. `Err`: the host's request
    /// gets this refusal instead.
    ///
    /// # Security
    ///
    /// No URL reaches the host inside an error unless the same URL would
    /// have reached it in an `elicitation/create`.
    pub fn on_url_required(&mut self, ctx: Context<'_>, error: &Value) -> Result<(), Refusal> {
        let method = "elicitation/create";
        let list = error.pointer("/data/elicitations");
        let Some(list) = list.and_then(Value::as_array).filter(|l| !l.is_empty()) else {
            let r = Refusal::malformed(
                "elicitation.request",
                "a URL-elicitation-required error (-32042) needs data.elicitations, a list of URL elicitations",
            );
            self.refused(ctx.generation, method, "via=error", &r);
            return Err(r);
        };
        for e in list {
            let mode = e.get("mode").and_then(Value::as_str);
            if mode != Some("url") {
                let r = Refusal::malformed(
                    "elicitation.request",
                    "a URL-elicitation-required error (-32042) may carry URL-mode elicitations only",
                );
                self.refused(ctx.generation, method, "via=error", &r);
                return Err(r);
            }
            if let Verdict::Refuse(r) = self.on_elicitation(ctx, e, " via=error") {
                return Err(r);
            }
        }
        Ok(())
    }

    fn on_sampling(
        &mut self,
        ctx: Context<'_>,
        params: &Value,
        bytes: usize,
        now: Instant,
        via: &str,
    ) -> Verdict {
        let req = SamplingRequest {
            params,
            bytes,
            revision: ctx.revision,
            host_tools: ctx
                .host_caps
                .pointer("/sampling/tools")
                .is_some_and(Value::is_object),
        };
        let method = "sampling/createMessage";
        let decision = sampling::check(&ctx.policy.raw.sampling, req, &mut self.limiter, now);
        let forwarded = !matches!(decision, SamplingDecision::Refuse(_));
        let task = if forwarded && via.is_empty() {
            match self.task_room(ctx, method, params) {
                Ok(t) => t,
                Err(r) => return Verdict::Refuse(r),
            }
        } else {
            false
        };
        let check = task.then_some(AnswerCheck {
            generation: ctx.generation,
            method,
            schema: None,
            task: true,
            task_id: None,
        });
        match decision {
            SamplingDecision::Forward { summary } => {
                let summary = format!("{summary}{via}");
                self.allowed(ctx.generation, method, &summary);
                Verdict::Forward {
                    params: None,
                    check,
                }
            }
            SamplingDecision::Clamp { asked, to, summary } => {
                let summary = format!("{summary} clampedFrom={asked}{via}");
                self.record(
                    ctx.generation,
                    method,
                    Decision::Clamped,
                    Some("sampling.max_tokens"),
                    &summary,
                    None,
                );
                let mut p = params.clone();
                if let Some(o) = p.as_object_mut() {
                    o.insert("maxTokens".into(), Value::from(to));
                }
                Verdict::Forward {
                    params: Some(p),
                    check,
                }
            }
            SamplingDecision::Refuse(r) => {
                let summary = format!("bytes={bytes}{via}");
                self.refused(ctx.generation, method, &summary, &r);
                Verdict::Refuse(r)
            }
        }
    }

    fn on_elicitation(&mut self, ctx: Context<'_>, params: &Value, via: &str) -> Verdict {
        let method = "elicitation/create";
        let policy = &ctx.policy.raw.elicitation;
        let task = params.get("task").is_some_and(|t| !t.is_null());
        let task_note = format!("{}{via}", if task { " task" } else { "" });
        let mut decision = elicitation::check(policy, params, ctx.revision);
        if let ElicitDecision::Url { .. } = decision {
            // The host consents to URL mode by declaring it.
            if !ctx
                .host_caps
                .pointer("/elicitation/url")
                .is_some_and(Value::is_object)
            {
                decision = ElicitDecision::Refuse(Refusal::policy(
                    "elicitation.url",
                    "the host did not declare URL-mode elicitation (capabilities.elicitation.url)",
                    "a URL-mode elicitation is sent only to a host that declared it",
                ));
            } else if via != " via=input_required"
                && let Err(r) = self.remember_url(ctx.generation, params)
            {
                decision = ElicitDecision::Refuse(r);
            }
        }
        let task = match (&decision, via.is_empty()) {
            (ElicitDecision::Refuse(_), _) | (_, false) => false,
            _ => match self.task_room(ctx, method, params) {
                Ok(t) => t,
                Err(r) => return Verdict::Refuse(r),
            },
        };
        match decision {
            ElicitDecision::Form { schema, summary } => {
                let summary = format!("mode=form fields={summary}{task_note}");
                self.allowed(ctx.generation, method, &summary);
                let schema = policy.validate_response.then_some(schema);
                Verdict::Forward {
                    params: None,
                    check: (schema.is_some() || task).then_some(AnswerCheck {
                        generation: ctx.generation,
                        method,
                        schema,
                        task,
                        task_id: None,
                    }),
                }
            }
            ElicitDecision::Url { host } => {
                let summary = format!("mode=url host={host}{task_note}");
                self.allowed(ctx.generation, method, &summary);
                Verdict::Forward {
                    params: None,
                    check: task.then_some(AnswerCheck {
                        generation: ctx.generation,
                        method,
                        schema: None,
                        task,
                        task_id: None,
                    }),
                }
            }
            ElicitDecision::Refuse(r) => {
                let mode = params.get("mode").and_then(Value::as_str).unwrap_or("form");
                let summary = format!("mode={mode}{task_note}");
                self.refused(ctx.generation, method, &summary, &r);
                Verdict::Refuse(r)
            }
        }
    }

    /// The host answered a request forwarded with `check`: `result` is its
    /// result (`None` for an error response, which passes). `Err` is the
    /// error to send the server instead of the answer.
    pub fn on_answer(
        &mut self,
        check: &AnswerCheck,
        result: Option<&Value>,
    ) -> Result<(), Refusal> {
        let Some(result) = result else {
            return Ok(());
        };
        // A task-augmented request answered with a CreateTaskResult: the
        // final answer comes through tasks/result.
        if check.task
            && result.get("action").is_none()
            && result.get("role").is_none()
            && let Some(id) = result.pointer("/task/taskId").and_then(Value::as_str)
        {
            if id.len() > MAX_KEPT_ID || self.tasks.len() >= MAX_TASKS {
                let r = Refusal::policy(
                    "guard.tasks",
                    &format!(
                        "rootfence follows at most {MAX_TASKS} tasks of at most {MAX_KEPT_ID}-byte ids"
                    ),
                    "the host's task was not passed on",
                );
                self.record(
                    check.generation,
                    check.method,
                    Decision::AnswerRefused,
                    Some(r.rule),
                    "task",
                    Some(&r.message),
                );
                return Err(r);
            }
            self.tasks.insert(id.to_string(), check.schema.clone());
            self.record(
                check.generation,
                check.method,
                Decision::AnswerForwarded,
                None,
                "task created",
                None,
            );
            return Ok(());
        }
        if check.method == "tasks/cancel" {
            if let Some(t) = &check.task_id {
                self.tasks.remove(t);
            }
            return Ok(());
        }
        let verdict = match &check.schema {
            Some(schema) => elicitation::check_answer(schema, result)
                .map(|a| format!("action={} fields={}", a.action, a.fields)),
            None => Ok("answered".to_string()),
        };
        match verdict {
            Ok(summary) => {
                if let Some(t) = &check.task_id {
                    // The result was given: the task is done with.
                    self.tasks.remove(t);
                }
                if check.schema.is_some() {
                    self.record(
                        check.generation,
                        check.method,
                        Decision::AnswerForwarded,
                        None,
                        &summary,
                        None,
                    );
                }
                Ok(())
            }
            Err(why) => {
                let r = Refusal::policy(
                    "elicitation.validate_response",
                    "elicitation.validate_response = true",
                    &format!("the host's answer does not match the requested schema: {why}"),
                );
                let action = result.get("action").and_then(Value::as_str).unwrap_or("?");
                let summary = format!("action={action}");
                self.record(
                    check.generation,
                    check.method,
                    Decision::AnswerRefused,
                    Some(r.rule),
                    &summary,
                    Some(&r.message),
                );
                Err(r)
            }
        }
    }

    /// Record an allowed request.
    fn allowed(&mut self, generation: u64, method: &str, summary: &str) {
        self.record(generation, method, Decision::Allowed, None, summary, None);
    }

    /// Record a refused request.
    fn refused(&mut self, generation: u64, method: &str, summary: &str, r: &Refusal) {
        let reason = Some(r.message.as_str());
        self.record(
            generation,
            method,
            Decision::Refused,
            Some(r.rule),
            summary,
            reason,
        );
    }

    fn record(
        &mut self,
        generation: u64,
        method: &str,
        decision: Decision,
        rule: Option<&str>,
        summary: &str,
        reason: Option<&str>,
    ) {
        self.audit.record(&Record {
            ts: audit::now_rfc3339(),
            generation,
            method,
            decision,
            rule,
            summary,
            reason,
        });
    }
}

#[cfg(test)]
mod tests;
