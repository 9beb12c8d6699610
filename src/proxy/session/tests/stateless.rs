//! The guard in the session, both eras, with no process: protocol
//! versions, `_meta` capabilities, `input_required` results (relayed,
//! changed, retried by rootfence, refused), the host's retries and roots
//! in 2026-07-28, and request methods sent as notifications.

use serde_json::{Value, json};

use super::{Sim, server_line};
use crate::proxy::guard::stateless::{HOST_ROOTS_KEY, MAX_OWN_ROUNDS, META_CLIENT_CAPABILITIES};
use crate::proxy::session::GenId;

const V: &str = "2026-07-28";

fn meta(caps: Value) -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": V,
        "io.modelcontextprotocol/clientCapabilities": caps,
        "io.modelcontextprotocol/clientInfo": {"name": "sim", "version": "1"},
    })
}

/// A stateless session (the host probed `server/discover`) with the
/// command-line root `a`; the host declares `caps`.
fn stateless(extra: &str) -> Sim {
    let mut sim = Sim::with(&["a"], &[], extra);
    sim.host(json!({"jsonrpc":"2.0","id":"d","method":"server/discover","params":{"_meta": meta(json!({}))}}));
    sim.serve_all();
    sim.answer(&json!("d"));
    sim
}

/// A stateless `tools/call` with id `id`, the host declaring `caps`.
fn call(sim: &mut Sim, id: Value, caps: Value) {
    sim.host(json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"probe","arguments":{"x":1},"_meta": meta(caps)}}));
}

/// The host requests generation `g` received and did not handle (taken
/// out of its inbox: the test answers them).
fn take(sim: &mut Sim, g: GenId) -> Vec<Value> {
    let s = sim.servers.get_mut(&g).expect("generation");
    s.inbox
        .drain(..)
        .filter(|m| m.get("method").is_some())
        .collect()
}

/// The rule of the refusal the host got for its request `id`.
fn refusal_rule(sim: &Sim, id: i64) -> Value {
    sim.answer(&json!(id))["error"]["data"]["rule"].clone()
}

fn reply(sim: &mut Sim, g: GenId, id: &Value, result: Value) {
    sim.event(server_line(
        g,
        &json!({"jsonrpc":"2.0","id":id,"result":result}),
    ));
}

fn roots_of(sim: &Sim, names: &[&str]) -> Value {
    let list: Vec<Value> = names
        .iter()
        .map(|n| {
            let p = sim.tree.p(n);
            json!({"uri": crate::roots::path_to_uri(&p), "name": p.file_name().unwrap().to_str().unwrap()})
        })
        .collect();
    json!({ "roots": list })
}

#[test]
fn capabilities_in_meta_are_shaped_on_every_request() {
    let mut sim = stateless("");
    let g = sim.current().unwrap();
    let discover = &sim.servers[&g].got[0];
    assert_eq!(
        discover["params"]["_meta"][META_CLIENT_CAPABILITIES],
        json!({"roots": {}})
    );
    call(
        &mut sim,
        json!(1),
        json!({"sampling": {"tools": {}}, "elicitation": {"form": {}, "url": {}}}),
    );
    let sent = take(&mut sim, g);
    // The default policy: no sampling, forms only; roots from rootfence.
    assert_eq!(
        sent[0]["params"]["_meta"][META_CLIENT_CAPABILITIES],
        json!({"roots": {}, "elicitation": {"form": {}}})
    );
    assert_eq!(sent[0]["params"]["arguments"], json!({"x": 1}));
}

#[test]
fn a_revision_the_guard_does_not_know_never_reaches_the_server() {
    let mut sim = stateless("");
    let g = sim.current().unwrap();
    sim.host(json!({"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2099-01-01"}}}));
    let a = sim.answer(&json!(2));
    assert_eq!(a["error"]["code"], -32022, "{a}");
    assert_eq!(a["error"]["data"]["requested"], "2099-01-01", "{a}");
    assert!(take(&mut sim, g).is_empty());

    // Offers are filtered: server/discover's list and a -32022 error's.
    sim.host(json!({"jsonrpc":"2.0","id":3,"method":"server/discover","params":{"_meta": meta(json!({}))}}));
    let sent = take(&mut sim, g);
    reply(
        &mut sim,
        g,
        &sent[0]["id"],
        json!({"supportedVersions": ["2025-11-25", V, "2099-01-01"], "serverInfo": {"name": "s", "version": "1"}}),
    );
    assert_eq!(
        sim.answer(&json!(3))["result"]["supportedVersions"],
        json!(["2025-11-25", V])
    );
    call(&mut sim, json!(4), json!({}));
    let sent = take(&mut sim, g);
    sim.event(server_line(
        g,
        &json!({"jsonrpc":"2.0","id":sent[0]["id"],"error":{"code":-32022,"message":"unsupported","data":{"supported":["2099-01-01",V],"requested":V}}}),
    ));
    assert_eq!(
        sim.answer(&json!(4))["error"]["data"]["supported"],
        json!([V])
    );
}

#[test]
fn initialize_offers_no_revision_newer_than_the_guard_knows() {
    let mut sim = Sim::with(&["a"], &[], "");
    sim.handshake("2099-01-01", false);
    let g = sim.current().unwrap();
    let init = sim.servers[&g]
        .got
        .iter()
        .find(|m| m["method"] == "initialize")
        .cloned()
        .unwrap();
    assert_eq!(init["params"]["protocolVersion"], V, "{init}");
}

#[test]
fn a_roots_only_result_is_answered_and_sent_again_by_rootfence() {
    let mut sim = stateless("");
    let g = sim.current().unwrap();
    call(&mut sim, json!("c"), json!({}));
    let first = take(&mut sim, g);
    assert_eq!(first[0]["id"], "c");
    let state = r#""s\u0074ate-1""#;
    let result = format!(
        r#"{{"resultType":"input_required","inputRequests":{{"where":{{"method":"roots/list"}}}},"requestState":{state}}}"#
    );
    sim.event(server_line(
        g,
        &serde_json::from_str(&format!(
            r#"{{"jsonrpc":"2.0","id":"c","result":{result}}}"#
        ))
        .unwrap(),
    ));
    // Nothing reached the host; the server got the same call again under
    // rootfence's id, with the enforced roots and its state byte for byte.
    assert!(sim.answers_to(&json!("c")).is_empty());
    let again = take(&mut sim, g);
    assert_eq!(again.len(), 1, "{again:?}");
    let id = again[0]["id"].clone();
    assert_ne!(id, json!("c"));
    assert_eq!(again[0]["method"], "tools/call");
    assert_eq!(again[0]["params"]["arguments"], json!({"x": 1}));
    assert_eq!(
        again[0]["params"]["inputResponses"]["where"],
        roots_of(&sim, &["a"])
    );
    // (Byte for byte: the guard's unit tests; here as a value.)
    assert_eq!(again[0]["params"]["requestState"], "state-1");
    // The final answer goes to the host under its id, once.
    reply(
        &mut sim,
        g,
        &id,
        json!({"content": [{"type": "text", "text": "done"}]}),
    );
    let a = sim.answer(&json!("c"));
    assert_eq!(a["result"]["content"][0]["text"], "done", "{a}");
    assert!(sim.s.is_idle());
}

#[test]
fn rootfence_retries_a_looping_server_a_bounded_number_of_times() {
    let mut sim = stateless("");
    let g = sim.current().unwrap();
    call(&mut sim, json!(9), json!({}));
    let mut rounds = 0;
    loop {
        let sent = take(&mut sim, g);
        if sent.is_empty() {
            break;
        }
        reply(
            &mut sim,
            g,
            &sent[0]["id"],
            json!({"resultType":"input_required","inputRequests":{"r":{"method":"roots/list"}}}),
        );
        rounds += 1;
        assert!(rounds <= MAX_OWN_ROUNDS + 1, "no cap");
    }
    assert_eq!(rounds, MAX_OWN_ROUNDS + 1);
    let a = sim.answer(&json!(9));
    assert_eq!(a["error"]["code"], -32001, "{a}");
    assert_eq!(a["error"]["data"]["rule"], "stateless.roots_rounds", "{a}");
    assert!(sim.s.is_idle());
}

#[test]
fn a_refused_input_request_fails_the_hosts_request_with_32001() {
    for era in ["stateless", "handshake"] {
        let mut sim = if era == "stateless" {
            stateless("")
        } else {
            let mut sim = Sim::with(&["a"], &[], "");
            sim.handshake("2025-11-25", false);
            sim
        };
        let g = sim.current().unwrap();
        if era == "stateless" {
            call(&mut sim, json!(5), json!({"sampling": {}}));
        } else {
            sim.call(json!(5), "probe");
        }
        let sent = take(&mut sim, g);
        reply(
            &mut sim,
            g,
            &sent[0]["id"],
            json!({"resultType":"input_required","inputRequests":{"llm":{"method":"sampling/createMessage","params":{"messages":[],"maxTokens":10}}},"requestState":"x"}),
        );
        let a = sim.answer(&json!(5));
        assert_eq!(a["error"]["code"], -32001, "{era}: {a}");
        assert_eq!(a["error"]["data"]["rule"], "sampling.allow", "{era}: {a}");
        // An input request the guard does not know: refused, not relayed.
        let n = if era == "stateless" { 6 } else { 7 };
        if era == "stateless" {
            call(&mut sim, json!(n), json!({}));
        } else {
            sim.call(json!(n), "probe");
        }
        let sent = take(&mut sim, g);
        reply(
            &mut sim,
            g,
            &sent[0]["id"],
            json!({"resultType":"input_required","inputRequests":{"k":{"method":"secrets/dump"}}}),
        );
        let a = sim.answer(&json!(n));
        assert_eq!(a["error"]["data"]["rule"], "stateless.input_request", "{a}");
        assert!(take(&mut sim, g).is_empty());
        assert!(sim.s.is_idle());
    }
}

#[test]
fn the_hosts_roots_are_asked_inside_a_result_and_rebuild_the_sandbox() {
    let mut sim = stateless("");
    let g1 = sim.current().unwrap();
    call(&mut sim, json!("first"), json!({"roots": {}}));
    // Answered by rootfence: a question for the host only.
    let a = sim.answer(&json!("first"));
    assert_eq!(a["result"]["resultType"], "input_required", "{a}");
    assert_eq!(
        a["result"]["inputRequests"],
        json!({ HOST_ROOTS_KEY: {"method": "roots/list"} })
    );
    assert!(take(&mut sim, g1).is_empty());
    // The host retries with its roots: the target now has `b`.
    let b = crate::roots::path_to_uri(&sim.tree.p("b"));
    sim.host(
        json!({"jsonrpc":"2.0","id":"retry","method":"tools/call","params":{
            "name":"probe","arguments":{"x":1},"_meta": meta(json!({"roots": {}})),
            "inputResponses": { HOST_ROOTS_KEY: {"roots": [{"uri": b}]} },
            "requestState": a["result"]["requestState"],
        }}),
    );
    sim.serve_all();
    let g2 = sim.current().unwrap();
    assert_ne!(g1, g2);
    assert_eq!(sim.enforced(), vec![sim.tree.p("a"), sim.tree.p("b")]);
    // The request went to the new generation, as a first request.
    let got = sim.servers[&g2]
        .got
        .iter()
        .find(|m| m["id"] == "retry")
        .cloned()
        .unwrap();
    assert!(got["params"].get("inputResponses").is_none(), "{got}");
    assert!(got["params"].get("requestState").is_none(), "{got}");
    assert_eq!(
        sim.answer(&json!("retry"))["result"]["content"][0]["text"],
        format!("gen {g2}")
    );
    // Asked once: the next call goes straight to the server.
    call(&mut sim, json!("next"), json!({"roots": {}}));
    sim.serve_all();
    assert!(sim.answer(&json!("next"))["result"]["content"].is_array());
}

#[test]
fn a_mixed_result_reaches_the_host_without_its_roots_and_the_retry_gets_them() {
    let mut sim = stateless("");
    let g = sim.current().unwrap();
    call(&mut sim, json!(1), json!({"elicitation": {"form": {}}}));
    let sent = take(&mut sim, g);
    let form = json!({"method":"elicitation/create","params":{"mode":"form","message":"name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}}}}});
    reply(
        &mut sim,
        g,
        &sent[0]["id"],
        json!({"resultType":"input_required","inputRequests":{"where":{"method":"roots/list"},"form":form},"requestState":"server-state"}),
    );
    let a = sim.answer(&json!(1));
    let seen = &a["result"];
    assert_eq!(seen["inputRequests"], json!({ "form": form }), "{a}");
    let token = seen["requestState"].as_str().unwrap().to_string();
    assert_ne!(token, "server-state");
    // The host's answer with a field the form did not ask for: refused.
    let retry = |id: i64, content: Value| {
        json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{
            "name":"probe","arguments":{"x":1},"_meta": meta(json!({"elicitation": {"form": {}}})),
            "inputResponses": {"form": {"action": "accept", "content": content}},
            "requestState": token,
        }})
    };
    sim.host(retry(2, json!({"name": "Ann", "password": "x"})));
    let a = sim.answer(&json!(2));
    assert_eq!(
        a["error"]["data"]["rule"], "elicitation.validate_response",
        "{a}"
    );
    assert!(take(&mut sim, g).is_empty());
    // The token is used up: the same retry again is refused too.
    sim.host(retry(3, json!({"name": "Ann"})));
    assert_eq!(refusal_rule(&sim, 3), "stateless.request_state");
    // A fresh round with a good answer: the server gets its own state and
    // the enforced roots.
    call(&mut sim, json!(4), json!({"elicitation": {"form": {}}}));
    let sent = take(&mut sim, g);
    reply(
        &mut sim,
        g,
        &sent[0]["id"],
        json!({"resultType":"input_required","inputRequests":{"where":{"method":"roots/list"},"form":form},"requestState":"server-state"}),
    );
    let token = sim.answer(&json!(4))["result"]["requestState"].clone();
    sim.host(
        json!({"jsonrpc":"2.0","id":5,"method":"tools/call","params":{
            "name":"probe","arguments":{"x":1},"_meta": meta(json!({"elicitation": {"form": {}}})),
            "inputResponses": {"form": {"action": "accept", "content": {"name": "Ann"}}},
            "requestState": token,
        }}),
    );
    let sent = take(&mut sim, g);
    assert_eq!(sent[0]["params"]["requestState"], "server-state");
    assert_eq!(
        sent[0]["params"]["inputResponses"],
        json!({"form": {"action": "accept", "content": {"name": "Ann"}}, "where": roots_of(&sim, &["a"])})
    );
}

#[test]
fn request_methods_sent_as_notifications_never_reach_the_host() {
    // 2026-07-28: alone.
    let mut sim = stateless("");
    let g = sim.current().unwrap();
    let before = sim.host_got.len();
    sim.event(server_line(
        g,
        &json!({"jsonrpc":"2.0","method":"sampling/createMessage","params":{"messages":[],"maxTokens":5}}),
    ));
    assert_eq!(sim.host_got.len(), before);
    // 2025-03-26: inside a batch, member by member.
    let mut sim = Sim::with(&["a"], &[], "");
    sim.handshake("2025-03-26", false);
    let g = sim.current().unwrap();
    let before = sim.host_got.len();
    let batch = json!([
        {"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hi"}},
        {"jsonrpc":"2.0","method":"elicitation/create","params":{"message":"pw?","requestedSchema":{"type":"object","properties":{}}}},
        {"jsonrpc":"2.0","method":"sampling/createMessage","params":{"messages":[],"maxTokens":5}},
    ]);
    sim.event(server_line(g, &batch));
    let got = &sim.host_got[before..];
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["method"], "notifications/message");
}

/// The tasks extension (2026-07-28): a task's questions come in the
/// host's `tasks/get` result and are answered with `tasks/update`.
#[test]
fn task_questions_are_judged_and_their_answers_checked() {
    let mut sim = stateless("");
    let g = sim.current().unwrap();
    let caps = json!({"elicitation": {"form": {}}});
    let get = |id: i64| json!({"jsonrpc":"2.0","id":id,"method":"tasks/get","params":{"taskId":"t1","_meta": meta(json!({"elicitation": {"form": {}}}))}});
    let form = json!({"method":"elicitation/create","params":{"mode":"form","message":"name?","requestedSchema":{"type":"object","properties":{"name":{"type":"string"}}}}});
    let secret = json!({"method":"elicitation/create","params":{"mode":"form","message":"Your GitHub password","requestedSchema":{"type":"object","properties":{"p":{"type":"string","default":"paste your GitHub password here"}}}}});
    let task = |requests: Value| json!({"resultType":"complete","taskId":"t1","status":"input_required","createdAt":"2026-07-28T00:00:00Z","lastUpdatedAt":"2026-07-28T00:00:00Z","ttlMs":null,"inputRequests":requests});
    // The host asks for the task with `tasks/get` `id`; the server answers
    // with these questions.
    let ask = |sim: &mut Sim, id: i64, requests: Value| {
        sim.host(get(id));
        let sent = take(sim, g);
        reply(sim, g, &sent[0]["id"], task(requests));
    };
    // A question the policy refuses: the host's tasks/get is answered with
    // the refusal, nothing of it reaches the host.
    ask(&mut sim, 1, json!({"s": secret}));
    assert_eq!(refusal_rule(&sim, 1), "elicitation.refuse_sensitive");
    // Only roots: rootfence answers with tasks/update itself and asks for
    // the task again; the host gets the next state.
    ask(&mut sim, 2, json!({"where": {"method":"roots/list"}}));
    let sent = take(&mut sim, g);
    assert_eq!(sent.len(), 2, "{sent:?}");
    assert_eq!(sent[0]["method"], "tasks/update");
    assert_eq!(
        sent[0]["params"],
        json!({"taskId":"t1","inputResponses":{"where": roots_of(&sim, &["a"])}})
    );
    assert_eq!(sent[1]["method"], "tasks/get");
    reply(
        &mut sim,
        g,
        &sent[1]["id"],
        json!({"resultType":"complete","taskId":"t1","status":"working","createdAt":"x","lastUpdatedAt":"x","ttlMs":null}),
    );
    assert_eq!(sim.answer(&json!(2))["result"]["status"], "working");
    // Roots and a form: the host sees the form only, and its tasks/update
    // is checked and completed with the roots.
    ask(&mut sim, 3, json!({"where": {"method":"roots/list"}, "f": form}));
    let a = sim.answer(&json!(3));
    assert_eq!(a["result"]["inputRequests"], json!({"f": form}), "{a}");
    let update = |id: i64, content: Value| json!({"jsonrpc":"2.0","id":id,"method":"tasks/update","params":{"taskId":"t1","inputResponses":{"f":{"action":"accept","content":content}},"_meta": meta(caps.clone())}});
    sim.host(update(4, json!({"name":"Ann","password":"x"})));
    assert_eq!(refusal_rule(&sim, 4), "elicitation.validate_response");
    assert!(take(&mut sim, g).is_empty());
    // Answers to questions rootfence never showed: refused.
    sim.host(update(5, json!({"name":"Ann"})));
    assert_eq!(refusal_rule(&sim, 5), "stateless.task");
    ask(&mut sim, 6, json!({"where": {"method":"roots/list"}, "f": form}));
    sim.host(update(7, json!({"name":"Ann"})));
    let sent = take(&mut sim, g);
    assert_eq!(
        sent[0]["params"]["inputResponses"],
        json!({"f": {"action":"accept","content":{"name":"Ann"}}, "where": roots_of(&sim, &["a"])})
    );
    // A task status notification carrying questions is not relayed.
    let seen = sim.host_raw.len();
    sim.event(server_line(g, &json!({"jsonrpc":"2.0","method":"notifications/tasks","params": task(json!({"s": secret}))})));
    assert_eq!(sim.host_raw.len(), seen);
}
