//! The sampling and elicitation guard end to end: the built `rootfence run`
//! (sandboxed) between the Python SDK's `ClientSession` as the host
//! (tests/peers/host.py, with sampling and elicitation callbacks that count
//! their calls) and `@modelcontextprotocol/server-everything` as the server
//! (its `trigger-sampling-request` and `trigger-elicitation-request`
//! tools). Both peers come from the lockfiles in tests/peers
//! (`tests/peers/install.sh`, run by `scripts/test.sh`).
//!
//! server-everything registers its sampling and elicitation tools only when
//! the client declared the capability, so a policy that denies a feature
//! (whose capability rootfence does not forward) makes the tool vanish.
//! It starts under the default node profile: no network, no writes.

use crate::peer;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// A policy file in a fresh directory: the node profile plus `extra`.
fn policy(extra: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("policy.toml");
    std::fs::write(&p, format!("[runtime]\nprofile = \"node\"\n{extra}")).unwrap();
    (dir, p)
}

fn everything_js() -> String {
    peer::server_js("@modelcontextprotocol/server-everything")
        .display()
        .to_string()
}

fn command(policy: &Path) -> Vec<String> {
    vec![
        env!("CARGO_BIN_EXE_rootfence").to_string(),
        "run".into(),
        "--policy".into(),
        policy.display().to_string(),
        "--".into(),
        peer::node().display().to_string(),
        everything_js(),
        "stdio".into(),
    ]
}

/// Run host.py with `scenario` plus a sampling reply and an elicitation
/// answer; returns the step results and the summary.
fn scenario(policy: &Path, answer: Value, steps: Value) -> (Vec<Value>, Value) {
    let s = json!({
        "command": command(policy),
        "roots": null,
        "sampling": {"text": "Paris", "model": "host-test-model"},
        "elicitation": answer,
        "steps": steps,
    });
    let (lines, summary) = peer::run_host(&s);
    assert_eq!(summary["sent"], summary["answered"], "{summary}");
    (lines, summary)
}

fn accept_ann() -> Value {
    json!({"action": "accept", "content": {"name": "Ann", "check": true}})
}

fn sample(prompt: &str, max_tokens: u64) -> Value {
    json!({"call": "trigger-sampling-request", "args": {"prompt": prompt, "maxTokens": max_tokens}})
}

fn calls<'a>(steps: &'a [Value], tool: &str) -> Vec<&'a Value> {
    steps.iter().filter(|s| s["call"] == tool).collect()
}

fn tools(steps: &[Value]) -> Vec<String> {
    steps
        .iter()
        .find_map(|s| s.get("tools"))
        .and_then(Value::as_array)
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_string())
        .collect()
}

#[test]
fn sampling_works_when_allowed_and_is_clamped_to_the_ceiling() {
    let (_d, p) = policy("[sampling]\nallow = true\nmax_tokens = 100\non_max_tokens = \"clamp\"\n");
    let (steps, summary) = scenario(
        &p,
        accept_ann(),
        json!([{"list_tools": true}, sample("Capital of France?", 50), sample("And of Italy?", 5000)]),
    );
    assert!(
        tools(&steps).contains(&"trigger-sampling-request".to_string()),
        "{steps:?}"
    );
    let done = calls(&steps, "trigger-sampling-request");
    for c in &done {
        assert_eq!(c["error"], false, "{c}");
        assert!(c["text"].as_str().unwrap().contains("Paris"), "{c}");
    }
    assert_eq!(summary["sampling_calls"], 2, "{summary}");
    // The second request asked 5000 tokens; the host was asked for 100.
    assert_eq!(
        summary["sampling_requests"],
        json!([{"maxTokens": 50}, {"maxTokens": 100}]),
        "{summary}"
    );
}

#[test]
fn sampling_is_refused_when_denied() {
    // Default policy: sampling denied. The server is never told the host
    // can sample, so server-everything does not even offer the tool.
    let (_d, p) = policy("");
    let (steps, summary) = scenario(
        &p,
        accept_ann(),
        json!([{"list_tools": true}, sample("Capital of France?", 50)]),
    );
    assert!(
        !tools(&steps).contains(&"trigger-sampling-request".to_string()),
        "{steps:?}"
    );
    let c = calls(&steps, "trigger-sampling-request")[0];
    assert_eq!(c["error"], true, "{c}");
    assert_eq!(summary["sampling_calls"], 0, "{summary}");
    // Allowed, but over the ceiling with on_max_tokens = "refuse": the
    // server gets rootfence's error, the host is never asked.
    let (_d, p) = policy("[sampling]\nallow = true\nmax_tokens = 100\n");
    let (steps, summary) = scenario(
        &p,
        accept_ann(),
        json!([sample("Capital of France?", 5000)]),
    );
    let c = calls(&steps, "trigger-sampling-request")[0];
    assert_eq!(c["error"], true, "{c}");
    let text = c["text"].as_str().unwrap();
    assert!(
        text.contains("-32001")
            && text.contains("rootfence policy: sampling.max_tokens = 100 (request asked 5000)"),
        "{text}"
    );
    assert_eq!(summary["sampling_calls"], 0, "{summary}");
}

#[test]
fn sampling_over_the_rate_limit_is_refused() {
    let (dir, p) = policy("[sampling]\nallow = true\nper_minute = 1\nburst = 2\n");
    let audit = dir.path().join("state/audit.jsonl");
    let mut text = std::fs::read_to_string(&p).unwrap();
    text.push_str(&format!("[audit]\nfile = \"{}\"\n", audit.display()));
    std::fs::write(&p, text).unwrap();
    let (steps, summary) = scenario(
        &p,
        accept_ann(),
        json!([
            sample("one", 10),
            sample("two", 10),
            sample("three", 10),
            sample("four", 10)
        ]),
    );
    let done = calls(&steps, "trigger-sampling-request");
    let errors: Vec<bool> = done.iter().map(|c| c["error"] == true).collect();
    assert_eq!(errors, [false, false, true, true], "{steps:?}");
    for c in &done[2..] {
        let t = c["text"].as_str().unwrap();
        assert!(
            t.contains(
                "rootfence policy: sampling.per_minute = 1, sampling.burst = 2 (rate limit reached"
            ),
            "{t}"
        );
    }
    // The callback ran only up to the limit.
    assert_eq!(summary["sampling_calls"], 2, "{summary}");
    // The audit file, written by rootfence outside the sandbox, has every
    // decision and no prompt.
    let log = std::fs::read_to_string(&audit).unwrap();
    let decisions: Vec<String> = log
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["decision"]
                .as_str()
                .unwrap()
                .to_string()
        })
        .collect();
    assert_eq!(
        decisions,
        ["allowed", "allowed", "refused", "refused"],
        "{log}"
    );
    assert!(!log.contains("three"), "{log}");
}

#[test]
fn elicitation_with_a_valid_schema_reaches_the_host() {
    // server-everything's form uses the 2025-11-25 schema forms (titled and
    // multi-select enums, defaults), and a description that mentions "pin":
    // all accepted.
    let (_d, p) = policy("");
    let (steps, summary) = scenario(
        &p,
        accept_ann(),
        json!([{"list_tools": true}, {"call": "trigger-elicitation-request", "args": {}}]),
    );
    assert!(
        tools(&steps).contains(&"trigger-elicitation-request".to_string()),
        "{steps:?}"
    );
    let c = calls(&steps, "trigger-elicitation-request")[0];
    assert_eq!(c["error"], false, "{c}");
    assert!(c["text"].as_str().unwrap().contains("- Name: Ann"), "{c}");
    assert_eq!(summary["elicitation_calls"], 1, "{summary}");
    let fields = &summary["elicitation_requests"][0]["fields"];
    assert!(fields.as_array().unwrap().len() >= 10, "{summary}");
}

#[test]
fn an_elicitation_answer_that_breaks_the_schema_does_not_reach_the_server() {
    let (_d, p) = policy("");
    // `name` is required; `integer` must lie in 1..100.
    let answer = json!({"action": "accept", "content": {"name": "Ann", "integer": 500}});
    let (steps, summary) = scenario(
        &p,
        answer,
        json!([{"call": "trigger-elicitation-request", "args": {}}]),
    );
    assert_eq!(summary["elicitation_calls"], 1, "{summary}");
    let c = calls(&steps, "trigger-elicitation-request")[0];
    assert_eq!(c["error"], true, "{c}");
    let t = c["text"].as_str().unwrap();
    assert!(
        t.contains("rootfence policy: elicitation.validate_response = true"),
        "{t}"
    );
    assert!(
        t.contains("field \"integer\": the number is outside 1..100"),
        "{t}"
    );
    assert!(
        !t.contains("500"),
        "the rejected value is not passed on: {t}"
    );
}

#[test]
fn elicitation_denied_by_policy_is_not_offered() {
    let (_d, p) = policy("[elicitation]\nallow = false\n");
    let (steps, summary) = scenario(
        &p,
        accept_ann(),
        json!([{"list_tools": true}, {"call": "trigger-elicitation-request", "args": {}}]),
    );
    assert!(
        !tools(&steps).contains(&"trigger-elicitation-request".to_string()),
        "{steps:?}"
    );
    assert_eq!(
        calls(&steps, "trigger-elicitation-request")[0]["error"],
        true
    );
    assert_eq!(summary["elicitation_calls"], 0, "{summary}");
}
