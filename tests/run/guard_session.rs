//! The sampling and elicitation guard in the running proxy: a scripted host
//! over in-memory pipes and the fake server (`examples/mcp_fake_server.rs`),
//! whose guard tools send requests the policy refuses or forwards and then
//! report what they received. Every test checks both sides: whether the
//! host saw the request, and what the server got back.

use crate::host;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use host::Host;
use host::session::{Running, start};
use rootfence::policy::Policy;
use rootfence::proxy::Change;
use serde_json::{Value, json};

/// Handshake with explicit client capabilities.
async fn init(h: &mut Host, version: &str, caps: Value) -> Value {
    let r = h
        .request(
            0,
            "initialize",
            json!({"protocolVersion":version,"capabilities":caps,"clientInfo":{"name":"guard-test","version":"1"}}),
            &json!([]),
        )
        .await;
    h.send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}))
        .await;
    r
}

/// What one tool call did: the tool's answer (what the server received
/// from the host, or from rootfence in its place) and the server requests
/// that reached the host.
struct Outcome {
    /// The server's report: the result or error it received, parsed.
    received: Value,
    /// Whether the server received an error.
    error: bool,
    /// Requests from the server the host saw.
    host_saw: Vec<Value>,
}

impl Outcome {
    fn host_saw(&self, method: &str) -> Vec<&Value> {
        self.host_saw
            .iter()
            .filter(|m| m["method"] == method)
            .collect()
    }

    /// The error the server received: code, rule, message.
    fn refusal(&self) -> (i64, String, String) {
        assert!(
            self.error,
            "expected the server to receive an error: {}",
            self.received
        );
        (
            self.received["code"].as_i64().unwrap(),
            self.received["data"]["rule"]
                .as_str()
                .unwrap_or("")
                .to_string(),
            self.received["message"].as_str().unwrap().to_string(),
        )
    }
}

/// Call `tool`; every server request that reaches the host is answered
/// with the result `answer` makes of it.
async fn call(
    h: &mut Host,
    id: i64,
    tool: &str,
    args: Value,
    mut answer: impl FnMut(&Value) -> Value,
) -> Outcome {
    h.send(json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":args}}))
        .await;
    let mut host_saw = Vec::new();
    loop {
        let m = tokio::time::timeout(Duration::from_secs(20), h.recv())
            .await
            .expect("no answer");
        if m.get("method").is_some() && m.get("id").is_some() {
            if m["method"] == "roots/list" {
                h.send(json!({"jsonrpc":"2.0","id":m["id"],"result":{"roots":[]}}))
                    .await;
                continue;
            }
            let result = answer(&m);
            h.send(json!({"jsonrpc":"2.0","id":m["id"],"result":result}))
                .await;
            host_saw.push(m);
            continue;
        }
        if m.get("id") == Some(&json!(id)) {
            let text = Host::text(&m);
            let received = serde_json::from_str(&text)
                .unwrap_or_else(|_| panic!("tool answer is not JSON: {m}"));
            return Outcome {
                received,
                error: m["result"]["isError"] == true,
                host_saw,
            };
        }
        h.seen.push(m);
    }
}

fn never(m: &Value) -> Value {
    panic!("the host should not have seen {m}")
}

fn sampled(_: &Value) -> Value {
    json!({"role":"assistant","content":{"type":"text","text":"Paris"},"model":"test-model","stopReason":"endTurn"})
}

async fn events(r: &mut Running, id: i64) -> String {
    let v = r.host.call(id, "events", json!({}), &json!([])).await;
    Host::text(&v)
}

// ---------------------------------------------------------------------
// Capability shaping

const FULL_CAPS: &str = r#"{"sampling":{"context":{},"tools":{}},"elicitation":{"form":{},"url":{}},
    "tasks":{"requests":{"sampling":{"createMessage":{}},"elicitation":{"create":{}}}}}"#;

#[tokio::test]
async fn denied_features_are_not_advertised_in_forwarded_and_replayed_initialize() {
    let mut r = start("[sampling]\nallow = true\n[elicitation]\nurl = true\n");
    init(
        &mut r.host,
        "2025-11-25",
        serde_json::from_str(FULL_CAPS).unwrap(),
    )
    .await;
    let ev = events(&mut r, 1).await;
    assert!(
        ev.contains(r#"sampling={} elicitation={"form":{},"url":{}}"#),
        "sampling without tools and context, both elicitation modes: {ev}"
    );
    // A policy edit denies sampling and URL mode: the relaunched server's
    // replayed initialize no longer offers them.
    let text = "[sampling]\nallow = false\n[elicitation]\nurl = false\n[limits]\nrebuild_debounce_ms = 20\n";
    let p = Policy::parse(text, None, Some(r.dir.path())).unwrap();
    r.events.send(Change::Policy(Ok(Box::new(p)))).unwrap();
    let ev = loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if r.log.pids.lock().unwrap().len() >= 2 {
            let ev = events(&mut r, 2).await;
            if ev.contains("initialize") {
                break ev;
            }
        }
    };
    assert!(ev.contains(r#"sampling=- elicitation={"form":{}}"#), "{ev}");
    assert!(
        ev.contains(r#"tasks={"requests":{"elicitation":{"create":{}}}}"#),
        "{ev}"
    );
}

#[tokio::test]
async fn a_denied_feature_is_refused_even_when_the_server_asks_anyway() {
    let mut r = start("[elicitation]\nallow = false\n");
    init(
        &mut r.host,
        "2025-06-18",
        json!({"sampling":{},"elicitation":{}}),
    )
    .await;
    let ev = events(&mut r, 1).await;
    assert!(ev.contains("sampling=- elicitation=-"), "{ev}");
    for (i, tool) in [(2, "sample"), (3, "elicit_form")] {
        let o = call(&mut r.host, i, tool, json!({}), never).await;
        let (code, rule, msg) = o.refusal();
        assert_eq!(code, -32001, "{tool}");
        assert!(
            rule == "sampling.allow" || rule == "elicitation.allow",
            "{rule}"
        );
        assert!(msg.starts_with("rootfence policy: "), "{msg}");
        assert!(o.host_saw.is_empty());
    }
}

// ---------------------------------------------------------------------
// Elicitation

#[tokio::test]
async fn an_elicitation_asking_for_a_password_is_refused() {
    let mut r = start("");
    init(&mut r.host, "2025-06-18", json!({"elicitation":{}})).await;
    let o = call(&mut r.host, 1, "elicit_password", json!({}), never).await;
    let (code, rule, msg) = o.refusal();
    assert_eq!(
        (code, rule.as_str()),
        (-32001, "elicitation.refuse_sensitive")
    );
    assert!(msg.contains("field \"password\""), "{msg}");
    assert!(o.host_saw("elicitation/create").is_empty());
    // The session goes on.
    let o = call(
        &mut r.host,
        2,
        "elicit_form",
        json!({}),
        |_| json!({"action":"decline"}),
    )
    .await;
    assert_eq!(o.received, json!({"action":"decline"}));
}

#[tokio::test]
async fn a_nested_object_schema_is_refused() {
    let mut r = start("");
    init(
        &mut r.host,
        "2025-11-25",
        json!({"elicitation":{"form":{}}}),
    )
    .await;
    let o = call(&mut r.host, 1, "elicit_nested", json!({}), never).await;
    let (code, rule, msg) = o.refusal();
    assert_eq!((code, rule.as_str()), (-32001, "elicitation.schema"));
    assert!(
        msg.contains("property \"address\": nested objects are not allowed"),
        "{msg}"
    );
    assert!(o.host_saw.is_empty());
}

#[tokio::test]
async fn a_valid_form_is_forwarded_and_an_answer_violating_it_is_not() {
    let mut r = start("");
    init(&mut r.host, "2025-06-18", json!({"elicitation":{}})).await;
    // Out of range and empty: the server gets an error instead.
    let o = call(
        &mut r.host,
        1,
        "elicit_form",
        json!({}),
        |_| json!({"action":"accept","content":{"name":"","age":200}}),
    )
    .await;
    let seen = o.host_saw("elicitation/create");
    assert_eq!(seen.len(), 1, "the host saw the form");
    assert_eq!(
        seen[0]["params"]["requestedSchema"]["required"],
        json!(["name"])
    );
    let (code, rule, msg) = o.refusal();
    assert_eq!(
        (code, rule.as_str()),
        (-32001, "elicitation.validate_response")
    );
    assert!(
        msg.starts_with("rootfence policy: elicitation.validate_response = true (the host's answer does not match the requested schema: "),
        "{msg}"
    );
    // Missing required, extra property, wrong type: each refused.
    for bad in [
        json!({"age":3}),
        json!({"name":"Ann","nickname":"Ace"}),
        json!({"name":"Ann","age":"3"}),
    ] {
        let content = bad.clone();
        let o = call(
            &mut r.host,
            2,
            "elicit_form",
            json!({}),
            move |_| json!({"action":"accept","content":content}),
        )
        .await;
        assert_eq!(o.refusal().1, "elicitation.validate_response", "{bad}");
        // The refused answer's values never reach the server.
        assert!(
            !o.received.to_string().contains("Ace") && !o.received.to_string().contains("Ann"),
            "{}",
            o.received
        );
    }
    // A matching answer goes through untouched.
    let o = call(
        &mut r.host,
        3,
        "elicit_form",
        json!({}),
        |_| json!({"action":"accept","content":{"name":"Ann","age":30}}),
    )
    .await;
    assert!(!o.error);
    assert_eq!(
        o.received,
        json!({"action":"accept","content":{"name":"Ann","age":30}})
    );
}

#[tokio::test]
async fn the_answer_check_can_be_turned_off() {
    let mut r = start("[elicitation]\nvalidate_response = false\n");
    init(&mut r.host, "2025-06-18", json!({"elicitation":{}})).await;
    let o = call(
        &mut r.host,
        1,
        "elicit_form",
        json!({}),
        |_| json!({"action":"accept","content":{"age":"old"}}),
    )
    .await;
    assert!(!o.error);
    assert_eq!(o.received["content"]["age"], "old");
}

#[tokio::test]
async fn url_elicitations_to_http_and_ip_literals_are_refused() {
    let mut r = start("[elicitation]\nurl = true\n");
    init(
        &mut r.host,
        "2025-11-25",
        json!({"elicitation":{"form":{},"url":{}}}),
    )
    .await;
    for (i, url, rule) in [
        (1, "http://example.com/authorize", "elicitation.url.https"),
        (2, "https://127.0.0.1/authorize", "elicitation.url_allow_ip"),
        (3, "https://[::1]:8443/", "elicitation.url_allow_ip"),
        (
            4,
            "https://user:pw@example.com/",
            "elicitation.url.userinfo",
        ),
        (
            5,
            "https://foo.localhost/",
            "elicitation.url_allow_localhost",
        ),
    ] {
        let o = call(&mut r.host, i, "elicit_url", json!({"url":url}), never).await;
        let (code, got, msg) = o.refusal();
        assert_eq!((code, got.as_str()), (-32001, rule), "{url}: {msg}");
        assert!(o.host_saw.is_empty());
    }
    let o = call(
        &mut r.host,
        6,
        "elicit_url",
        json!({"url":"https://auth.example.com/authorize"}),
        |_| json!({"action":"accept"}),
    )
    .await;
    assert_eq!(o.host_saw("elicitation/create").len(), 1);
    assert_eq!(o.received, json!({"action":"accept"}));
}

#[tokio::test]
async fn url_mode_is_refused_when_the_policy_has_no_url_mode() {
    let mut r = start("");
    init(
        &mut r.host,
        "2025-11-25",
        json!({"elicitation":{"form":{},"url":{}}}),
    )
    .await;
    let o = call(
        &mut r.host,
        1,
        "elicit_url",
        json!({"url":"https://example.com/"}),
        never,
    )
    .await;
    assert_eq!(o.refusal().1, "elicitation.url");
}

#[tokio::test]
async fn a_task_augmented_form_is_checked_when_its_result_is_fetched() {
    let mut r = start("");
    let caps =
        json!({"elicitation":{"form":{}},"tasks":{"requests":{"elicitation":{"create":{}}}}});
    init(&mut r.host, "2025-11-25", caps).await;
    let o = call(&mut r.host, 1, "elicit_form", json!({"task":true}), |m| {
        if m["method"] == "elicitation/create" {
            assert!(m["params"]["task"].is_object(), "{m}");
            json!({"task":{"taskId":"task-7","status":"working","createdAt":"2025-11-25T00:00:00Z","ttl":60000}})
        } else {
            assert_eq!(m["method"], "tasks/result");
            assert_eq!(m["params"]["taskId"], "task-7");
            json!({"action":"accept","content":{"name":"Ann","age":-4}})
        }
    })
    .await;
    assert_eq!(o.host_saw("elicitation/create").len(), 1);
    assert_eq!(o.host_saw("tasks/result").len(), 1);
    let (code, rule, msg) = o.refusal();
    assert_eq!(
        (code, rule.as_str()),
        (-32001, "elicitation.validate_response")
    );
    assert!(msg.contains("field \"age\""), "{msg}");
    // The same policy applies to a task-augmented request itself.
    let o = call(&mut r.host, 2, "elicit_password", json!({}), never).await;
    assert_eq!(o.refusal().1, "elicitation.refuse_sensitive");
}

// ---------------------------------------------------------------------
// Sampling

#[tokio::test]
async fn an_oversized_sampling_request_is_refused() {
    let mut r = start("[sampling]\nallow = true\nmax_request_bytes = 10000\n");
    init(&mut r.host, "2025-06-18", json!({"sampling":{}})).await;
    let o = call(
        &mut r.host,
        1,
        "sample_oversized",
        json!({"bytes": 20000}),
        never,
    )
    .await;
    let (code, rule, msg) = o.refusal();
    assert_eq!(
        (code, rule.as_str()),
        (-32001, "sampling.max_request_bytes")
    );
    assert!(
        msg.starts_with("rootfence policy: sampling.max_request_bytes = 10000 (request is 20"),
        "{msg}"
    );
    let o = call(
        &mut r.host,
        2,
        "sample_oversized",
        json!({"bytes": 100}),
        sampled,
    )
    .await;
    assert!(!o.error);
    assert_eq!(o.host_saw("sampling/createMessage").len(), 1);
}

#[tokio::test]
async fn sampling_with_tools_is_refused_unless_allowed_and_declared() {
    let mut r = start("[sampling]\nallow = true\n");
    init(&mut r.host, "2025-11-25", json!({"sampling":{"tools":{}}})).await;
    let o = call(&mut r.host, 1, "sample_tools", json!({}), never).await;
    let (code, rule, msg) = o.refusal();
    assert_eq!((code, rule.as_str()), (-32001, "sampling.allow_tools"));
    assert_eq!(
        msg,
        "rootfence policy: sampling.allow_tools = false (request has 1 tools)"
    );
    // Allowed by the policy and declared by the host: forwarded.
    let mut r = start("[sampling]\nallow = true\nallow_tools = true\n");
    init(&mut r.host, "2025-11-25", json!({"sampling":{"tools":{}}})).await;
    let ev = events(&mut r, 1).await;
    assert!(ev.contains(r#"sampling={"tools":{}}"#), "{ev}");
    let o = call(&mut r.host, 2, "sample_tools", json!({}), sampled).await;
    assert!(!o.error, "{}", o.received);
    assert_eq!(
        o.host_saw("sampling/createMessage")[0]["params"]["tools"][0]["name"],
        "get_weather"
    );
    // Allowed by the policy, but the host never declared sampling.tools.
    let mut r = start("[sampling]\nallow = true\nallow_tools = true\n");
    init(&mut r.host, "2025-11-25", json!({"sampling":{}})).await;
    let o = call(&mut r.host, 1, "sample_tools", json!({}), never).await;
    assert!(
        o.refusal()
            .2
            .contains("the host did not declare the sampling.tools capability")
    );
}

#[tokio::test]
async fn max_tokens_over_the_cap_is_clamped_and_forwarded() {
    let mut r = start("[sampling]\nallow = true\nmax_tokens = 1024\non_max_tokens = \"clamp\"\n");
    init(&mut r.host, "2025-06-18", json!({"sampling":{}})).await;
    let o = call(
        &mut r.host,
        1,
        "sample_tokens",
        json!({"maxTokens": 5000}),
        sampled,
    )
    .await;
    assert!(!o.error, "{}", o.received);
    let seen = o.host_saw("sampling/createMessage");
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0]["params"]["maxTokens"], 1024);
    assert_eq!(seen[0]["params"]["messages"][0]["content"]["text"], "hi");
    assert_eq!(o.received["model"], "test-model");
    // Under the cap: forwarded byte for byte (the value is untouched).
    let o = call(
        &mut r.host,
        2,
        "sample_tokens",
        json!({"maxTokens": 200}),
        sampled,
    )
    .await;
    assert_eq!(
        o.host_saw("sampling/createMessage")[0]["params"]["maxTokens"],
        200
    );
}

#[tokio::test]
async fn max_tokens_over_the_cap_is_refused_by_default() {
    let mut r = start("[sampling]\nallow = true\nmax_tokens = 1024\n");
    init(&mut r.host, "2025-06-18", json!({"sampling":{}})).await;
    let o = call(
        &mut r.host,
        1,
        "sample_tokens",
        json!({"maxTokens": 5000}),
        never,
    )
    .await;
    let (code, rule, msg) = o.refusal();
    assert_eq!((code, rule.as_str()), (-32001, "sampling.max_tokens"));
    assert_eq!(
        msg,
        "rootfence policy: sampling.max_tokens = 1024 (request asked 5000)"
    );
}

#[tokio::test]
async fn the_rate_limit_is_not_reset_by_a_relaunch() {
    let mut r = start("[sampling]\nallow = true\nper_minute = 1\nburst = 2\n");
    init(&mut r.host, "2025-06-18", json!({"sampling":{}})).await;
    for i in 1..=2 {
        let o = call(&mut r.host, i, "sample", json!({}), sampled).await;
        assert!(!o.error, "request {i} is within the burst: {}", o.received);
    }
    // The server crashes and is restarted: no fresh budget.
    r.host.send(json!({"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"crash","arguments":{}}})).await;
    let crashed = r.host.response(json!(9), &json!([])).await;
    assert!(crashed.get("error").is_some(), "{crashed}");
    let o = call(&mut r.host, 10, "sample", json!({}), never).await;
    let (code, rule, msg) = o.refusal();
    assert_eq!((code, rule.as_str()), (-32001, "sampling.rate"));
    assert!(msg.contains("rate limit reached"), "{msg}");
    assert_eq!(
        r.log.pids.lock().unwrap().len(),
        2,
        "the server was relaunched"
    );
}

// ---------------------------------------------------------------------
// Audit

#[derive(Clone, Default)]
struct Capture(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Capture {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn every_decision_is_audited_in_the_log_and_the_file() {
    let cap = Capture::default();
    let writer = cap.clone();
    let sub = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_env_filter("warn,audit=info")
        .with_ansi(false)
        .finish();
    // The session runs on this test's single-threaded runtime, so a
    // thread-local subscriber sees it.
    let _guard = tracing::subscriber::set_default(sub);
    let mut r = start(
        "[sampling]\nallow = true\nmax_tokens = 100\n[audit]\nfile = \"{dir}/state/audit.jsonl\"\n",
    );
    init(
        &mut r.host,
        "2025-06-18",
        json!({"sampling":{},"elicitation":{}}),
    )
    .await;
    call(&mut r.host, 1, "sample", json!({}), sampled).await;
    call(
        &mut r.host,
        2,
        "sample_tokens",
        json!({"maxTokens": 500}),
        never,
    )
    .await;
    call(&mut r.host, 3, "elicit_password", json!({}), never).await;
    call(
        &mut r.host,
        4,
        "elicit_form",
        json!({}),
        |_| json!({"action":"accept","content":{"name":"Secret Agent Ann"}}),
    )
    .await;
    // The file is written from a thread of its own: its five lines, within
    // seconds.
    let file = r.dir.path().join("state/audit.jsonl");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    let mut text = std::fs::read_to_string(&file).unwrap_or_default();
    while text.lines().count() < 5 && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        text = std::fs::read_to_string(&file).unwrap_or_default();
    }
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let got: Vec<(&str, &str, &str)> = lines
        .iter()
        .map(|l| {
            (
                l["method"].as_str().unwrap(),
                l["decision"].as_str().unwrap(),
                l["rule"].as_str().unwrap_or("-"),
            )
        })
        .collect();
    assert_eq!(
        got,
        [
            ("sampling/createMessage", "allowed", "-"),
            ("sampling/createMessage", "refused", "sampling.max_tokens"),
            (
                "elicitation/create",
                "refused",
                "elicitation.refuse_sensitive"
            ),
            ("elicitation/create", "allowed", "-"),
            ("elicitation/create", "answer-forwarded", "-"),
        ]
    );
    assert!(lines.iter().all(|l| l["generation"] == 1));
    // Never the content: not the prompt, the form's message, the answer.
    for secret in [
        "\"hi\"",
        "Log in to continue",
        "Who are you",
        "Secret Agent",
    ] {
        assert!(!text.contains(secret), "{secret} in {text}");
    }
    let log = String::from_utf8(cap.0.lock().unwrap().clone()).unwrap();
    let audit_lines: Vec<&str> = log.lines().filter(|l| l.contains("audit:")).collect();
    assert_eq!(audit_lines.len(), 5, "{log}");
    assert!(
        audit_lines[1].contains("WARN") && audit_lines[1].contains("rule=\"sampling.max_tokens\""),
        "{log}"
    );
    assert!(!log.contains("Secret Agent"), "{log}");
}
