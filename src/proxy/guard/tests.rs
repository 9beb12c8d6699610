//! Unit tests of the guard facade and capability shaping.

use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use super::*;
use crate::policy::Policy;

fn policy(text: &str) -> Policy {
    Policy::parse(text, None, None).unwrap()
}

fn shaped(caps: Value, text: &str) -> Value {
    let mut m: Map<String, Value> = serde_json::from_value(caps).unwrap();
    shape_capabilities(&mut m, &policy(text).raw);
    Value::Object(m)
}

#[test]
fn revisions() {
    assert_eq!(Revision::parse("2024-11-05"), Revision::V2024_11_05);
    assert_eq!(Revision::parse("2025-03-26"), Revision::V2025_03_26);
    assert_eq!(Revision::parse("2025-06-18"), Revision::V2025_06_18);
    assert_eq!(Revision::parse("2025-11-25"), Revision::V2025_11_25);
    assert_eq!(Revision::parse("2026-07-28"), Revision::V2026_07_28);
    // Unknown dates count as the revision before them.
    assert_eq!(Revision::parse("2025-09-01"), Revision::V2025_06_18);
    assert_eq!(Revision::parse("2027-01-01"), Revision::V2026_07_28);
    assert!(Revision::V2025_06_18 < Revision::V2025_11_25);
    assert_eq!(Revision::V2025_11_25.to_string(), "2025-11-25");
}

#[test]
fn denied_features_are_not_advertised() {
    let host = json!({"roots":{"listChanged":true},"sampling":{"context":{},"tools":{}},
        "elicitation":{"form":{},"url":{}},"experimental":{"x":{}},
        "tasks":{"requests":{"sampling":{"createMessage":{}},"elicitation":{"create":{}}}}});
    // The default policy: no sampling; forms, no URLs.
    let v = shaped(host.clone(), "");
    assert!(v.get("sampling").is_none(), "{v}");
    assert_eq!(v["elicitation"], json!({"form":{}}));
    assert_eq!(v["tasks"]["requests"], json!({"elicitation":{"create":{}}}));
    assert_eq!(v["roots"], json!({"listChanged":true}));
    assert_eq!(v["experimental"], json!({"x":{}}));
    // Sampling allowed, without tools or context.
    let v = shaped(host.clone(), "[sampling]\nallow = true\n");
    assert_eq!(v["sampling"], json!({}));
    // With both.
    let v = shaped(
        host.clone(),
        "[sampling]\nallow = true\nallow_tools = true\nallow_include_context = true\n",
    );
    assert_eq!(v["sampling"], json!({"context":{},"tools":{}}));
    // Elicitation denied altogether.
    let v = shaped(host.clone(), "[elicitation]\nallow = false\n");
    assert!(v.get("elicitation").is_none(), "{v}");
    assert_eq!(v["tasks"]["requests"], json!({}));
    // URL mode only.
    let v = shaped(host.clone(), "[elicitation]\nform = false\nurl = true\n");
    assert_eq!(v["elicitation"], json!({"url":{}}));
    // Both modes.
    let v = shaped(host, "[elicitation]\nurl = true\n");
    assert_eq!(v["elicitation"], json!({"form":{},"url":{}}));
}

#[test]
fn empty_elicitation_means_form_only() {
    let host = json!({"elicitation":{}});
    assert_eq!(shaped(host.clone(), "")["elicitation"], json!({}));
    let v = shaped(host, "[elicitation]\nform = false\nurl = true\n");
    assert!(v.get("elicitation").is_none(), "{v}");
    // A host offering URL mode only, under a policy without URL mode.
    let v = shaped(json!({"elicitation":{"url":{}}}), "");
    assert!(v.get("elicitation").is_none(), "{v}");
}

#[test]
fn hosts_without_the_features_are_left_alone() {
    let v = shaped(json!({"roots":{}}), "[sampling]\nallow = true\n");
    assert_eq!(v, json!({"roots":{}}));
    // A malformed capability is dropped rather than passed on.
    let v = shaped(
        json!({"sampling": true, "elicitation": 1}),
        "[sampling]\nallow = true\n",
    );
    assert_eq!(v, json!({}));
}

fn ctx<'a>(p: &'a Policy, caps: &'a Value, g: u64) -> Context<'a> {
    Context {
        policy: p,
        revision: Revision::V2025_11_25,
        host_caps: caps,
        generation: g,
    }
}

#[test]
fn guard_clamps_by_rewriting_max_tokens() {
    let p = policy("[sampling]\nallow = true\nmax_tokens = 100\non_max_tokens = \"clamp\"\n");
    let mut g = Guard::new(&p);
    let caps = json!({"sampling":{}});
    let params = json!({"messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"maxTokens":5000,"temperature":0.5});
    match g.on_request(
        ctx(&p, &caps, 1),
        "sampling/createMessage",
        &params,
        200,
        Instant::now(),
    ) {
        Verdict::Forward {
            params: Some(p),
            check: None,
        } => {
            assert_eq!(p["maxTokens"], 100);
            assert_eq!(p["temperature"], 0.5);
            assert_eq!(p["messages"], params["messages"]);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn guard_rate_state_outlives_generations() {
    let p = policy("[sampling]\nallow = true\nper_minute = 1\nburst = 2\n");
    let mut g = Guard::new(&p);
    let caps = json!({"sampling":{}});
    let params =
        json!({"messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"maxTokens":5});
    let t0 = Instant::now();
    let mut outcomes = Vec::new();
    // Two requests from generation 1, then a relaunched generation 2 tries.
    for (gen_, dt) in [(1, 0), (1, 1), (2, 2), (2, 61)] {
        let v = g.on_request(
            ctx(&p, &caps, gen_),
            "sampling/createMessage",
            &params,
            100,
            t0 + Duration::from_secs(dt),
        );
        outcomes.push(matches!(v, Verdict::Forward { .. }));
    }
    assert_eq!(outcomes, [true, true, false, true]);
}

#[test]
fn guard_refusal_is_a_json_rpc_error_with_the_rule() {
    let p = policy("");
    let mut g = Guard::new(&p);
    let caps = json!({});
    let v = g.on_request(
        ctx(&p, &caps, 1),
        "sampling/createMessage",
        &json!({"messages":[],"maxTokens":1}),
        50,
        Instant::now(),
    );
    let Verdict::Refuse(r) = v else {
        panic!("{v:?}")
    };
    let line: Value = serde_json::from_slice(&r.response("\"s-7\"")).unwrap();
    assert_eq!(line["id"], "s-7");
    assert_eq!(line["error"]["code"], -32001);
    assert_eq!(
        line["error"]["data"],
        json!({"rule":"sampling.allow","by":"rootfence"})
    );
    assert!(
        line["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("rootfence policy: sampling.allow = false")
    );
}

fn form_params(task: bool) -> Value {
    let mut p = json!({"message":"Your name?","requestedSchema":{"type":"object",
        "properties":{"name":{"type":"string","minLength":1}},"required":["name"]}});
    if task {
        p["task"] = json!({"ttl": 60000});
    }
    p
}

/// Generation `generation`'s `elicitation/create` with `params`, 100
/// bytes long, now.
fn elicit(g: &mut Guard, p: &Policy, caps: &Value, generation: u64, params: &Value) -> Verdict {
    let cx = ctx(p, caps, generation);
    g.on_request(cx, "elicitation/create", params, 100, Instant::now())
}

/// Generation `generation` asks for task `t-1`'s result, now.
fn task_result(g: &mut Guard, p: &Policy, caps: &Value, generation: u64) -> Verdict {
    let params = json!({"taskId":"t-1"});
    g.on_request(ctx(p, caps, generation), "tasks/result", &params, 60, Instant::now())
}

/// The answer check of a forwarded request.
fn answer_check(v: Verdict) -> AnswerCheck {
    let Verdict::Forward { check: Some(c), .. } = v else {
        panic!("not forwarded with a check: {v:?}")
    };
    c
}

#[test]
fn guard_checks_elicitation_answers() {
    let p = policy("");
    let mut g = Guard::new(&p);
    let caps = json!({"elicitation":{}});
    let check = answer_check(elicit(&mut g, &p, &caps, 1, &form_params(false)));
    assert!(
        g.on_answer(
            &check,
            Some(&json!({"action":"accept","content":{"name":"Ann"}}))
        )
        .is_ok()
    );
    let e = g
        .on_answer(
            &check,
            Some(&json!({"action":"accept","content":{"name":""}})),
        )
        .unwrap_err();
    assert_eq!(e.rule, "elicitation.validate_response");
    assert_eq!(e.code, -32001);
    assert!(
        e.message
            .starts_with("rootfence policy: elicitation.validate_response = true (the host's answer does not match the requested schema: field \"name\": length 0"),
        "{}",
        e.message
    );
    // An error answer from the host passes as it is.
    assert!(g.on_answer(&check, None).is_ok());
    // validate_response = false: nothing to check.
    let p = policy("[elicitation]\nvalidate_response = false\n");
    let mut g = Guard::new(&p);
    let v = elicit(&mut g, &p, &caps, 1, &form_params(false));
    assert!(matches!(v, Verdict::Forward { check: None, .. }), "{v:?}");
}

#[test]
fn task_augmented_elicitation_is_checked_when_its_result_arrives() {
    let p = policy("");
    let mut g = Guard::new(&p);
    let caps = json!({"elicitation":{},"tasks":{"requests":{"elicitation":{"create":{}}}}});
    let check = answer_check(elicit(&mut g, &p, &caps, 3, &form_params(true)));
    // The host creates a task.
    let created = json!({"task":{"taskId":"t-1","status":"working","createdAt":"2025-11-25T00:00:00Z","ttl":60000}});
    assert!(g.on_answer(&check, Some(&created)).is_ok());
    // The server asks for the result: the guard attaches the form.
    let result_check = answer_check(task_result(&mut g, &p, &caps, 3));
    let e = g
        .on_answer(
            &result_check,
            Some(&json!({"action":"accept","content":{"other":1}})),
        )
        .unwrap_err();
    assert_eq!(e.rule, "elicitation.validate_response");
    // Asked again, by this server or a relaunched one: checked again,
    // until a result passes; then the task is done with, and a request
    // naming it is refused like one naming a task never created.
    for gen_ in [3, 4] {
        let again = answer_check(task_result(&mut g, &p, &caps, gen_));
        assert!(
            g.on_answer(
                &again,
                Some(&json!({"action":"accept","content":{"other":1}}))
            )
            .is_err()
        );
    }
    let last = answer_check(task_result(&mut g, &p, &caps, 4));
    assert!(
        g.on_answer(
            &last,
            Some(&json!({"action":"accept","content":{"name":"Ann"}}))
        )
        .is_ok()
    );
    for (method, params) in [
        ("tasks/result", json!({"taskId":"t-1"})),
        ("tasks/result", json!({"taskId":"t-9"})),
        ("tasks/get", json!({"taskId":"t-9"})),
        ("tasks/cancel", json!({"taskId":"t-9"})),
        ("tasks/result", json!({"taskId":7})),
        ("tasks/result", json!({})),
        ("tasks/result", Value::Null),
    ] {
        let v = g.on_request(ctx(&p, &caps, 3), method, &params, 60, Instant::now());
        let Verdict::Refuse(r) = v else {
            panic!("{method} {params}: {v:?}")
        };
        assert_eq!(r.rule, "guard.tasks");
    }
}

#[test]
fn the_task_table_is_bounded_by_refusal() {
    let p = policy("");
    let mut g = Guard::new(&p);
    let caps = json!({"elicitation":{}});
    let params = form_params(true);
    let mut last = None;
    for i in 0..=MAX_TASKS {
        let v = elicit(&mut g, &p, &caps, 1, &params);
        match v {
            Verdict::Forward { check: Some(c), .. } => {
                let created = json!({"task":{"taskId":format!("t-{i}"),"status":"working"}});
                assert!(g.on_answer(&c, Some(&created)).is_ok());
            }
            other => {
                last = Some((i, other));
                break;
            }
        }
    }
    let Some((i, Verdict::Refuse(r))) = last else {
        panic!("never refused")
    };
    assert_eq!((i, r.rule), (MAX_TASKS, "guard.tasks"));
    // The first task is still known: nothing was evicted.
    let v = g.on_request(
        ctx(&p, &caps, 1),
        "tasks/get",
        &json!({"taskId":"t-0"}),
        60,
        Instant::now(),
    );
    assert!(matches!(v, Verdict::Forward { .. }), "{v:?}");
}

#[test]
fn task_augmented_requests_get_the_same_policy() {
    let p = policy("");
    let mut g = Guard::new(&p);
    let caps = json!({"elicitation":{}});
    let mut params = form_params(true);
    params["requestedSchema"]["properties"]["password"] = json!({"type":"string"});
    let v = elicit(&mut g, &p, &caps, 1, &params);
    assert!(
        matches!(v, Verdict::Refuse(ref r) if r.rule == "elicitation.refuse_sensitive"),
        "{v:?}"
    );
}

#[test]
fn audit_file_gets_one_line_per_decision_and_no_content() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("logs/audit.jsonl");
    let p = policy(&format!(
        "[sampling]\nallow = true\nmax_tokens = 10\n[audit]\nfile = \"{}\"\n",
        file.display()
    ));
    let mut g = Guard::new(&p);
    let caps = json!({"sampling":{},"elicitation":{}});
    let secret_text = "the secret prompt text";
    let s = json!({"messages":[{"role":"user","content":{"type":"text","text":secret_text}}],"maxTokens":5});
    let big = json!({"messages":[{"role":"user","content":{"type":"text","text":secret_text}}],"maxTokens":50});
    let now = Instant::now();
    g.on_request(ctx(&p, &caps, 1), "sampling/createMessage", &s, 100, now);
    g.on_request(ctx(&p, &caps, 2), "sampling/createMessage", &big, 100, now);
    let check = answer_check(g.on_request(
        ctx(&p, &caps, 2),
        "elicitation/create",
        &form_params(false),
        100,
        now,
    ));
    let _ = g.on_answer(
        &check,
        Some(&json!({"action":"accept","content":{"name":"Alice Secretname"}})),
    );
    // Dropped, the guard's log has written what it was given.
    drop(g);
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        !text.contains("secret prompt")
            && !text.contains("Secretname")
            && !text.contains("Your name?"),
        "{text}"
    );
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let got: Vec<(u64, &str, &str)> = lines
        .iter()
        .map(|l| {
            (
                l["generation"].as_u64().unwrap(),
                l["method"].as_str().unwrap(),
                l["decision"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            (1, "sampling/createMessage", "allowed"),
            (2, "sampling/createMessage", "refused"),
            (2, "elicitation/create", "allowed"),
            (2, "elicitation/create", "answer-forwarded"),
        ]
    );
    assert_eq!(lines[1]["rule"], "sampling.max_tokens");
    assert_eq!(
        lines[1]["reason"],
        "rootfence policy: sampling.max_tokens = 10 (request asked 50)"
    );
    assert_eq!(lines[2]["summary"], "mode=form fields=name:string");
    assert!(lines[0]["ts"].as_str().unwrap().ends_with('Z'));
}

#[test]
fn an_audit_file_that_cannot_be_opened_is_not_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let blocker = dir.path().join("f");
    std::fs::write(&blocker, "").unwrap();
    let p = policy(&format!(
        "[sampling]\nallow = true\n[audit]\nfile = \"{}/audit.jsonl\"\n",
        blocker.display()
    ));
    let mut g = Guard::new(&p);
    let caps = json!({"sampling":{}});
    let s =
        json!({"messages":[{"role":"user","content":{"type":"text","text":"x"}}],"maxTokens":5});
    let v = g.on_request(
        ctx(&p, &caps, 1),
        "sampling/createMessage",
        &s,
        100,
        Instant::now(),
    );
    assert!(matches!(v, Verdict::Forward { .. }));
}
