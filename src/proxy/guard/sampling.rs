//! `sampling/createMessage`: the policy's decision on a request and the
//! rate limiter. Pure: the clock is passed in.

use std::time::{Duration, Instant};

use serde_json::Value;

use super::{Refusal, Revision};
use crate::policy::{ContentType, OverLimit, SamplingSection};

/// What the guard decided on a `sampling/createMessage`.
#[derive(Debug, Clone, PartialEq)]
pub enum SamplingDecision {
    /// Forward as it is.
    Forward {
        /// For the audit log (never the content).
        summary: String,
    },
    /// Forward with `maxTokens` lowered to `to`.
    Clamp {
        /// What the request asked.
        asked: u64,
        /// The ceiling it is lowered to.
        to: u64,
        /// For the audit log.
        summary: String,
    },
    /// Answer the server with an error.
    Refuse(Refusal),
}

/// A sampling request as the guard sees it.
#[derive(Debug, Clone, Copy)]
pub struct SamplingRequest<'a> {
    /// `params`.
    pub params: &'a Value,
    /// Size of the whole JSON-RPC line, in bytes.
    pub bytes: usize,
    /// The session's protocol revision.
    pub revision: Revision,
    /// Whether the host declared `capabilities.sampling.tools`.
    pub host_tools: bool,
}

/// Sustained rate plus burst: a token bucket holding `max(burst, 1)`
/// requests, refilled at `per_minute` a minute, full at start. Lives in the
/// session, so a relaunched server does not get a fresh budget.
#[derive(Debug, Clone, Default)]
pub struct RateLimiter {
    tokens: f64,
    last: Option<Instant>,
}

impl RateLimiter {
    /// Take one request's worth at `now`, or say how long until one is
    /// available.
    pub fn try_take(&mut self, per_minute: u32, burst: u32, now: Instant) -> Result<(), Duration> {
        let capacity = f64::from(burst.max(1));
        let rate = f64::from(per_minute) / 60.0; // per second
        self.tokens = match self.last {
            None => capacity,
            Some(last) => {
                let dt = now.saturating_duration_since(last).as_secs_f64();
                (self.tokens + dt * rate).min(capacity)
            }
        };
        self.last = Some(now);
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            return Ok(());
        }
        if rate <= 0.0 {
            return Err(Duration::MAX);
        }
        Err(Duration::from_secs_f64((1.0 - self.tokens) / rate))
    }
}

fn content_type_name(t: ContentType) -> &'static str {
    match t {
        ContentType::Text => "text",
        ContentType::Image => "image",
        ContentType::Audio => "audio",
    }
}

/// Decide on a `sampling/createMessage`. The rate limiter is charged only
/// when every other rule passes.
pub fn check(
    policy: &SamplingSection,
    req: SamplingRequest<'_>,
    limiter: &mut RateLimiter,
    now: Instant,
) -> SamplingDecision {
    match check_rules(policy, req) {
        Err(r) => SamplingDecision::Refuse(r),
        Ok((asked, summary)) => {
            if let Err(wait) = limiter.try_take(policy.per_minute, policy.burst, now) {
                return SamplingDecision::Refuse(Refusal::policy(
                    "sampling.rate",
                    &format!(
                        "sampling.per_minute = {}, sampling.burst = {}",
                        policy.per_minute, policy.burst
                    ),
                    &format!(
                        "rate limit reached; the next request is possible in {:.1} s",
                        wait.as_secs_f64().min(86_400.0)
                    ),
                ));
            }
            if asked > policy.max_tokens {
                SamplingDecision::Clamp {
                    asked,
                    to: policy.max_tokens,
                    summary,
                }
            } else {
                SamplingDecision::Forward { summary }
            }
        }
    }
}

/// Every rule but the rate. On success: the requested `maxTokens` (to be
/// clamped when over the ceiling and the policy says clamp) and a summary.
fn check_rules(
    policy: &SamplingSection,
    req: SamplingRequest<'_>,
) -> Result<(u64, String), Refusal> {
    if !policy.allow {
        return Err(Refusal::policy(
            "sampling.allow",
            "sampling.allow = false",
            "this server may not ask the host's model for completions",
        ));
    }
    if req.bytes as u64 > policy.max_request_bytes {
        return Err(Refusal::policy(
            "sampling.max_request_bytes",
            &format!("sampling.max_request_bytes = {}", policy.max_request_bytes),
            &format!("request is {} bytes", req.bytes),
        ));
    }
    let params = req.params.as_object().ok_or_else(|| {
        Refusal::malformed(
            "sampling.request",
            "sampling/createMessage params must be an object",
        )
    })?;
    let messages = params
        .get("messages")
        .and_then(Value::as_array)
        .ok_or_else(|| {
            Refusal::malformed(
                "sampling.request",
                "sampling/createMessage needs a messages array",
            )
        })?;
    let tools_ok = policy.allow_tools && req.host_tools;
    let counts = check_messages(policy, tools_ok, messages)?;
    let include = include_context(policy, params)?;
    let tool_count = check_tools(policy, &req, params, tools_ok)?;
    let asked = max_tokens(policy, params)?;
    let blocks = counts
        .iter()
        .map(|(t, c)| format!("{t}:{c}"))
        .collect::<Vec<_>>()
        .join(",");
    let summary = format!(
        "messages={} blocks={} maxTokens={asked} includeContext={include} tools={tool_count}{} bytes={}",
        messages.len(),
        if blocks.is_empty() { "-" } else { &blocks },
        if params.get("task").is_some() {
            " task"
        } else {
            ""
        },
        req.bytes,
    );
    Ok((asked, summary))
}

/// A refusal of tools: by the policy, or for want of the host's
/// `sampling.tools` capability.
fn tools_refusal(policy: &SamplingSection, what: &str) -> Refusal {
    if policy.allow_tools {
        Refusal::policy(
            "sampling.allow_tools",
            "sampling.allow_tools = true, but the host did not declare the sampling.tools capability",
            what,
        )
    } else {
        Refusal::policy("sampling.allow_tools", "sampling.allow_tools = false", what)
    }
}

/// The content types the policy allows, by name.
fn allowed_names(policy: &SamplingSection) -> Vec<&'static str> {
    policy
        .content_types
        .iter()
        .map(|t| content_type_name(*t))
        .collect()
}

/// A refusal of a content type.
fn types_refusal(policy: &SamplingSection, what: String) -> Refusal {
    Refusal::policy(
        "sampling.content_types",
        &format!("sampling.content_types = {:?}", allowed_names(policy)),
        &what,
    )
}

/// Every block of every message is of a type the policy allows (tool
/// blocks only with tools allowed); how many of each type.
fn check_messages(
    policy: &SamplingSection,
    tools_ok: bool,
    messages: &[Value],
) -> Result<Vec<(String, usize)>, Refusal> {
    let allowed = allowed_names(policy);
    let mut counts: Vec<(String, usize)> = Vec::new();
    for (i, m) in messages.iter().enumerate() {
        let n = i + 1;
        let content = m.get("content").ok_or_else(|| {
            Refusal::malformed("sampling.request", &format!("message {n} has no content"))
        })?;
        let blocks: Vec<&Value> = match content {
            Value::Array(a) => a.iter().collect(),
            Value::Object(_) => vec![content],
            _ => {
                return Err(Refusal::malformed(
                    "sampling.request",
                    &format!("message {n}'s content must be a block or an array of blocks"),
                ));
            }
        };
        for b in blocks {
            let ty = b.get("type").and_then(Value::as_str).ok_or_else(|| {
                Refusal::malformed(
                    "sampling.request",
                    &format!("a content block of message {n} has no type"),
                )
            })?;
            match counts.iter_mut().find(|(t, _)| t == ty) {
                Some((_, c)) => *c += 1,
                None => counts.push((ty.to_string(), 1)),
            }
            match ty {
                "tool_use" | "tool_result" => {
                    if !tools_ok {
                        return Err(tools_refusal(
                            policy,
                            &format!("message {n} has a block of type {ty:?}"),
                        ));
                    }
                    if ty == "tool_result" {
                        check_tool_result(policy, &allowed, n, b)?;
                    }
                }
                t if allowed.contains(&t) => {}
                t => {
                    return Err(types_refusal(
                        policy,
                        format!("message {n} has a block of type {t:?}"),
                    ));
                }
            }
        }
    }
    Ok(counts)
}

/// The blocks inside a `tool_result` are of allowed types.
fn check_tool_result(
    policy: &SamplingSection,
    allowed: &[&str],
    n: usize,
    b: &Value,
) -> Result<(), Refusal> {
    let Some(inner) = b.get("content") else {
        return Ok(());
    };
    let inner: Vec<&Value> = match inner {
        Value::Array(a) => a.iter().collect(),
        other => vec![other],
    };
    for ib in inner {
        let it = ib.get("type").and_then(Value::as_str).unwrap_or("(none)");
        if !allowed.contains(&it) {
            return Err(types_refusal(
                policy,
                format!("a tool_result in message {n} has a block of type {it:?}"),
            ));
        }
    }
    Ok(())
}

/// The `includeContext` asked, when the policy allows it.
fn include_context<'a>(
    policy: &SamplingSection,
    params: &'a serde_json::Map<String, Value>,
) -> Result<&'a str, Refusal> {
    let include = match params.get("includeContext") {
        None | Some(Value::Null) => "none",
        Some(Value::String(s)) => s.as_str(),
        Some(_) => {
            return Err(Refusal::malformed(
                "sampling.request",
                "includeContext must be a string",
            ));
        }
    };
    if include != "none" && !policy.allow_include_context {
        return Err(Refusal::policy(
            "sampling.allow_include_context",
            "sampling.allow_include_context = false",
            &format!("request asked includeContext {include:?}"),
        ));
    }
    Ok(include)
}

/// Tools and `toolChoice` only where allowed and where the revision has
/// them; how many tools.
fn check_tools(
    policy: &SamplingSection,
    req: &SamplingRequest<'_>,
    params: &serde_json::Map<String, Value>,
    tools_ok: bool,
) -> Result<usize, Refusal> {
    let tools = params.get("tools").filter(|v| !v.is_null());
    let tool_count = tools.and_then(Value::as_array).map_or(0, Vec::len);
    if tools.is_some() || params.get("toolChoice").is_some_and(|v| !v.is_null()) {
        if !tools_ok {
            let what = if tools.is_some() {
                format!("request has {tool_count} tools")
            } else {
                "request has a toolChoice".to_string()
            };
            return Err(tools_refusal(policy, &what));
        }
        if req.revision < Revision::V2025_11_25 {
            return Err(Refusal::malformed(
                "sampling.request",
                &format!(
                    "sampling with tools does not exist in protocol {}",
                    req.revision
                ),
            ));
        }
    }
    Ok(tool_count)
}

/// The `maxTokens` asked: a positive integer, not over the ceiling when
/// the policy refuses what is over it.
fn max_tokens(
    policy: &SamplingSection,
    params: &serde_json::Map<String, Value>,
) -> Result<u64, Refusal> {
    let asked = match params.get("maxTokens") {
        Some(v) => v.as_u64().filter(|n| *n > 0),
        None => None,
    }
    .ok_or_else(|| {
        Refusal::malformed("sampling.request", "maxTokens must be a positive integer")
    })?;
    if asked > policy.max_tokens && policy.on_max_tokens == OverLimit::Refuse {
        return Err(Refusal::policy(
            "sampling.max_tokens",
            &format!("sampling.max_tokens = {}", policy.max_tokens),
            &format!("request asked {asked}"),
        ));
    }
    Ok(asked)
}

#[cfg(test)]
mod tests;
