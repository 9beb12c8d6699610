//! Unit tests of the sampling decision and the rate limiter.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::*;
use crate::policy::{ContentType, OverLimit, SamplingSection};

fn allowing() -> SamplingSection {
    SamplingSection {
        allow: true,
        per_minute: 60,
        burst: 100,
        max_tokens: 1024,
        ..SamplingSection::default()
    }
}

fn text_request(max_tokens: u64) -> Value {
    json!({"messages":[{"role":"user","content":{"type":"text","text":"What is the capital of France?"}}],
           "maxTokens": max_tokens})
}

fn decide_with(
    policy: &SamplingSection,
    params: &Value,
    revision: Revision,
    host_tools: bool,
) -> SamplingDecision {
    let bytes = params.to_string().len() + 60;
    let req = SamplingRequest {
        params,
        bytes,
        revision,
        host_tools,
    };
    check(policy, req, &mut RateLimiter::default(), Instant::now())
}

fn decide(policy: &SamplingSection, params: &Value) -> SamplingDecision {
    decide_with(policy, params, Revision::V2025_11_25, false)
}

fn refused(d: &SamplingDecision) -> (&'static str, i64, String) {
    match d {
        SamplingDecision::Refuse(r) => (r.rule, r.code, r.message.clone()),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

#[test]
fn allowed_request_is_forwarded_with_a_contentless_summary() {
    let d = decide(&allowing(), &text_request(100));
    let SamplingDecision::Forward { summary } = d else {
        panic!("{d:?}")
    };
    assert!(summary.contains("messages=1"), "{summary}");
    assert!(summary.contains("blocks=text:1"), "{summary}");
    assert!(summary.contains("maxTokens=100"), "{summary}");
    assert!(
        !summary.contains("France"),
        "no content in summaries: {summary}"
    );
}

#[test]
fn denied_by_default() {
    let d = decide(&SamplingSection::default(), &text_request(10));
    let (rule, code, msg) = refused(&d);
    assert_eq!(rule, "sampling.allow");
    assert_eq!(code, -32001);
    assert!(
        msg.starts_with("rootfence policy: sampling.allow = false ("),
        "{msg}"
    );
}

#[test]
fn max_tokens_refused_or_clamped() {
    let p = allowing();
    let d = decide(&p, &text_request(5000));
    let (rule, _, msg) = refused(&d);
    assert_eq!(rule, "sampling.max_tokens");
    assert_eq!(
        msg,
        "rootfence policy: sampling.max_tokens = 1024 (request asked 5000)"
    );
    // At the ceiling: fine.
    assert!(matches!(
        decide(&p, &text_request(1024)),
        SamplingDecision::Forward { .. }
    ));
    let clamp = SamplingSection {
        on_max_tokens: OverLimit::Clamp,
        ..allowing()
    };
    match decide(&clamp, &text_request(5000)) {
        SamplingDecision::Clamp { asked, to, .. } => assert_eq!((asked, to), (5000, 1024)),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        decide(&clamp, &text_request(10)),
        SamplingDecision::Forward { .. }
    ));
}

#[test]
fn max_tokens_must_be_a_positive_integer() {
    for bad in [json!(0), json!(-5), json!(1.5), json!("100"), Value::Null] {
        let mut req = text_request(1);
        req["maxTokens"] = bad.clone();
        let d = decide(&allowing(), &req);
        let (rule, code, _) = refused(&d);
        assert_eq!((rule, code), ("sampling.request", -32602), "{bad}");
    }
    let mut req = text_request(1);
    req.as_object_mut().unwrap().remove("maxTokens");
    assert_eq!(refused(&decide(&allowing(), &req)).0, "sampling.request");
}

#[test]
fn request_size() {
    let p = SamplingSection {
        max_request_bytes: 200,
        ..allowing()
    };
    let mut req = text_request(10);
    req["messages"][0]["content"]["text"] = json!("x".repeat(500));
    let d = decide(&p, &req);
    let (rule, _, msg) = refused(&d);
    assert_eq!(rule, "sampling.max_request_bytes");
    assert!(
        msg.starts_with("rootfence policy: sampling.max_request_bytes = 200 (request is "),
        "{msg}"
    );
    assert!(matches!(
        decide(&p, &text_request(10)),
        SamplingDecision::Forward { .. }
    ));
}

#[test]
fn content_types_single_blocks() {
    let text_only = allowing();
    let image = json!({"messages":[
        {"role":"user","content":{"type":"text","text":"describe"}},
        {"role":"user","content":{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}}],
        "maxTokens":10});
    let (rule, _, msg) = refused(&decide(&text_only, &image));
    assert_eq!(rule, "sampling.content_types");
    assert_eq!(
        msg,
        "rootfence policy: sampling.content_types = [\"text\"] (message 2 has a block of type \"image\")"
    );
    let with_image = SamplingSection {
        content_types: vec![ContentType::Text, ContentType::Image],
        ..allowing()
    };
    assert!(matches!(
        decide(&with_image, &image),
        SamplingDecision::Forward { .. }
    ));
    let audio = json!({"messages":[{"role":"user","content":{"type":"audio","data":"AAAA","mimeType":"audio/wav"}}],"maxTokens":10});
    assert_eq!(
        refused(&decide(&with_image, &audio)).0,
        "sampling.content_types"
    );
    let all = SamplingSection {
        content_types: vec![ContentType::Text, ContentType::Image, ContentType::Audio],
        ..allowing()
    };
    assert!(matches!(
        decide(&all, &audio),
        SamplingDecision::Forward { .. }
    ));
    // Block types no policy allows.
    for t in ["resource", "resource_link", "video", "html"] {
        let req = json!({"messages":[{"role":"user","content":{"type":t}}],"maxTokens":10});
        assert_eq!(
            refused(&decide(&all, &req)).0,
            "sampling.content_types",
            "{t}"
        );
    }
}

#[test]
fn content_types_array_content_every_block_checked() {
    let req = json!({"messages":[
        {"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},
        {"role":"assistant","content":[{"type":"text","text":"c"},{"type":"audio","data":"AA","mimeType":"audio/wav"}]}],
        "maxTokens":10});
    let (rule, _, msg) = refused(&decide(&allowing(), &req));
    assert_eq!(rule, "sampling.content_types");
    assert!(
        msg.contains("message 2 has a block of type \"audio\""),
        "{msg}"
    );
    let ok = json!({"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}],"maxTokens":10});
    match decide(&allowing(), &ok) {
        SamplingDecision::Forward { summary } => {
            assert!(summary.contains("blocks=text:2"), "{summary}")
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn malformed_messages() {
    for req in [
        json!({"maxTokens":10}),
        json!({"messages":{},"maxTokens":10}),
        json!({"messages":[{"role":"user"}],"maxTokens":10}),
        json!({"messages":[{"role":"user","content":"hi"}],"maxTokens":10}),
        json!({"messages":[{"role":"user","content":{"text":"no type"}}],"maxTokens":10}),
        json!([1, 2]),
    ] {
        let (rule, code, _) = refused(&decide(&allowing(), &req));
        assert_eq!((rule, code), ("sampling.request", -32602), "{req}");
    }
}

#[test]
fn include_context() {
    for (ctx, ok) in [
        (json!("none"), true),
        (Value::Null, true),
        (json!("thisServer"), false),
        (json!("allServers"), false),
        (json!("everything"), false),
    ] {
        let mut req = text_request(10);
        req["includeContext"] = ctx.clone();
        let d = decide(&allowing(), &req);
        if ok {
            assert!(
                matches!(d, SamplingDecision::Forward { .. }),
                "{ctx}: {d:?}"
            );
        } else {
            let (rule, _, msg) = refused(&d);
            assert_eq!(rule, "sampling.allow_include_context");
            assert!(
                msg.contains(&format!("request asked includeContext {ctx}")),
                "{msg}"
            );
        }
    }
    let p = SamplingSection {
        allow_include_context: true,
        ..allowing()
    };
    let mut req = text_request(10);
    req["includeContext"] = json!("allServers");
    assert!(matches!(decide(&p, &req), SamplingDecision::Forward { .. }));
}

fn tools_request() -> Value {
    json!({"messages":[{"role":"user","content":{"type":"text","text":"weather?"}}],
           "tools":[{"name":"get_weather","inputSchema":{"type":"object"}}],
           "toolChoice":{"mode":"auto"},"maxTokens":10})
}

#[test]
fn tools_need_the_policy_and_the_host_capability() {
    let req = tools_request();
    let (rule, _, msg) = refused(&decide_with(&allowing(), &req, Revision::V2025_11_25, true));
    assert_eq!(rule, "sampling.allow_tools");
    assert_eq!(
        msg,
        "rootfence policy: sampling.allow_tools = false (request has 1 tools)"
    );
    let p = SamplingSection {
        allow_tools: true,
        ..allowing()
    };
    let (rule, _, msg) = refused(&decide_with(&p, &req, Revision::V2025_11_25, false));
    assert_eq!(rule, "sampling.allow_tools");
    assert!(
        msg.contains("the host did not declare the sampling.tools capability"),
        "{msg}"
    );
    match decide_with(&p, &req, Revision::V2025_11_25, true) {
        SamplingDecision::Forward { summary } => assert!(summary.contains("tools=1"), "{summary}"),
        other => panic!("{other:?}"),
    }
    // toolChoice alone counts too.
    let mut choice = text_request(10);
    choice["toolChoice"] = json!({"mode":"none"});
    assert!(
        refused(&decide(&allowing(), &choice))
            .2
            .contains("toolChoice")
    );
    // Tools do not exist before 2025-11-25.
    assert_eq!(
        refused(&decide_with(&p, &req, Revision::V2025_06_18, true)).0,
        "sampling.request"
    );
}

#[test]
fn tool_blocks_need_tools_allowed_and_their_results_are_checked() {
    let req = json!({"messages":[
        {"role":"user","content":{"type":"text","text":"weather?"}},
        {"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"get_weather","input":{}}]},
        {"role":"user","content":[{"type":"tool_result","toolUseId":"t1","content":[{"type":"text","text":"sunny"}]}]}],
        "tools":[{"name":"get_weather","inputSchema":{"type":"object"}}],"maxTokens":10});
    let (rule, _, msg) = refused(&decide_with(&allowing(), &req, Revision::V2025_11_25, true));
    assert_eq!(rule, "sampling.allow_tools");
    assert!(
        msg.contains("message 2 has a block of type \"tool_use\""),
        "{msg}"
    );
    let p = SamplingSection {
        allow_tools: true,
        ..allowing()
    };
    assert!(matches!(
        decide_with(&p, &req, Revision::V2025_11_25, true),
        SamplingDecision::Forward { .. }
    ));
    // A tool result carrying an image when only text is allowed.
    let mut img = req.clone();
    img["messages"][2]["content"][0]["content"] =
        json!([{"type":"image","data":"AA","mimeType":"image/png"}]);
    let (rule, _, msg) = refused(&decide_with(&p, &img, Revision::V2025_11_25, true));
    assert_eq!(rule, "sampling.content_types");
    assert!(
        msg.contains("a tool_result in message 3 has a block of type \"image\""),
        "{msg}"
    );
}

#[test]
fn task_augmented_requests_get_the_same_rules() {
    let mut req = text_request(5000);
    req["task"] = json!({"ttl": 60000});
    assert_eq!(refused(&decide(&allowing(), &req)).0, "sampling.max_tokens");
    req["maxTokens"] = json!(10);
    match decide(&allowing(), &req) {
        SamplingDecision::Forward { summary } => assert!(summary.contains(" task"), "{summary}"),
        other => panic!("{other:?}"),
    }
    let mut img = req.clone();
    img["messages"][0]["content"] = json!({"type":"image","data":"AA","mimeType":"image/png"});
    assert_eq!(
        refused(&decide(&allowing(), &img)).0,
        "sampling.content_types"
    );
}

#[test]
fn rate_limiter_with_an_injected_clock() {
    let t0 = Instant::now();
    let mut rl = RateLimiter::default();
    // 6 a minute (one per 10 s), bursts of 2: the bucket starts full.
    assert!(rl.try_take(6, 2, t0).is_ok());
    assert!(rl.try_take(6, 2, t0).is_ok());
    let wait = rl.try_take(6, 2, t0).unwrap_err();
    assert!((wait.as_secs_f64() - 10.0).abs() < 0.01, "{wait:?}");
    // 5 s later: half a token.
    let wait = rl.try_take(6, 2, t0 + Duration::from_secs(5)).unwrap_err();
    assert!((wait.as_secs_f64() - 5.0).abs() < 0.01, "{wait:?}");
    assert!(rl.try_take(6, 2, t0 + Duration::from_secs(10)).is_ok());
    assert!(rl.try_take(6, 2, t0 + Duration::from_secs(10)).is_err());
    // A long pause refills to the burst, never beyond.
    let later = t0 + Duration::from_secs(3600);
    assert!(rl.try_take(6, 2, later).is_ok());
    assert!(rl.try_take(6, 2, later).is_ok());
    assert!(rl.try_take(6, 2, later).is_err());
    // A clock that goes backwards adds nothing.
    assert!(rl.try_take(6, 2, t0).is_err());
}

#[test]
fn rate_limiter_burst_zero_means_one() {
    let t0 = Instant::now();
    let mut rl = RateLimiter::default();
    assert!(rl.try_take(60, 0, t0).is_ok());
    assert!(rl.try_take(60, 0, t0).is_err());
    assert!(rl.try_take(60, 0, t0 + Duration::from_secs(1)).is_ok());
}

#[test]
fn sustained_rate_over_a_simulated_hour() {
    let t0 = Instant::now();
    let mut rl = RateLimiter::default();
    let mut ok = 0;
    // A request every second for an hour at 10 a minute, burst 3.
    for s in 0..3600 {
        if rl.try_take(10, 3, t0 + Duration::from_secs(s)).is_ok() {
            ok += 1;
        }
    }
    // 600 sustained (one per 6 s) plus the initial burst.
    assert!((600..=603).contains(&ok), "{ok}");
}

#[test]
fn the_rate_is_charged_only_for_requests_that_pass_every_other_rule() {
    let p = SamplingSection {
        per_minute: 1,
        burst: 1,
        ..allowing()
    };
    let mut rl = RateLimiter::default();
    let now = Instant::now();
    let run = |rl: &mut RateLimiter, params: &Value| {
        check(
            &p,
            SamplingRequest {
                params,
                bytes: 100,
                revision: Revision::V2025_11_25,
                host_tools: false,
            },
            rl,
            now,
        )
    };
    // Refused for max_tokens: no charge.
    assert_eq!(
        refused(&run(&mut rl, &text_request(9999))).0,
        "sampling.max_tokens"
    );
    assert!(matches!(
        run(&mut rl, &text_request(10)),
        SamplingDecision::Forward { .. }
    ));
    let d = run(&mut rl, &text_request(10));
    let (rule, code, msg) = refused(&d);
    assert_eq!((rule, code), ("sampling.rate", -32001));
    assert!(
        msg.starts_with("rootfence policy: sampling.per_minute = 1, sampling.burst = 1 (rate limit reached; the next request is possible in 60.0 s)"),
        "{msg}"
    );
}
