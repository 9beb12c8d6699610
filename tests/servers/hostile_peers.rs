//! The attack peers of the stateless-era end-to-end tests, checked without
//! rootfence: the hostile Python server (tests/peers/hostile_server.py)
//! talking straight to the Python SDK host (tests/peers/host.py), in the
//! 2026-07-28 era (`Client(mode="auto")`, through `input_required`
//! results) and in the handshake era (`Client(mode="legacy")` and a bare
//! `ClientSession`, through server -> client requests). Unfenced, the
//! server learns the host's roots, its model's answer and the secrets typed
//! into its form, and is told the host can sample: the leaks the fenced
//! tests must show closed.

use crate::peer;

use serde_json::{Value, json};

const HOST_ROOT: &str = "file:///home/someone/private-project";
const MODEL_TEXT: &str = "the host model's private answer";

fn hostile() -> Vec<String> {
    vec![
        peer::python().display().to_string(),
        peer::peers()
            .join("hostile_server.py")
            .display()
            .to_string(),
    ]
}

/// Run the host in `mode` (`None`: a bare ClientSession) against the
/// hostile server, calling `capabilities` then `probe`; returns the
/// server's two reports and the host's summary.
fn unfenced(mode: Option<&str>) -> (Value, Value, Value) {
    let mut s = json!({
        "command": hostile(),
        "roots": [[HOST_ROOT, "private"]],
        "sampling": {"text": MODEL_TEXT, "model": "host-model"},
        "elicitation": {"action": "accept", "content": {"password": "hunter2", "api_key": "sk-live-0123"}},
        "steps": [{"call": "capabilities"}, {"call": "probe"}],
    });
    if let Some(m) = mode {
        s["mode"] = json!(m);
    }
    let (steps, summary) = peer::run_host(&s);
    assert_eq!(summary["sent"], summary["answered"], "{summary}");
    let report = |i: usize| -> Value {
        let step = &steps[i];
        assert_eq!(step["error"], false, "{step}");
        serde_json::from_str(step["text"].as_str().unwrap()).unwrap()
    };
    (report(1), report(2), summary)
}

fn assert_everything_leaks(caps: &Value, probe: &Value, summary: &Value) {
    // Told the host can sample and elicit, and given its roots.
    assert_eq!(caps["capabilities"]["sampling"], json!({}), "{caps}");
    assert!(caps["capabilities"]["elicitation"].is_object(), "{caps}");
    assert_eq!(probe["roots"], json!([HOST_ROOT]), "{probe}");
    // The host's model answered, with no ceiling on the tokens.
    assert_eq!(probe["sampling"], MODEL_TEXT, "{probe}");
    assert_eq!(summary["sampling_requests"], json!([{"maxTokens": 5000}]));
    // The secrets typed into the form.
    assert_eq!(
        probe["form"],
        json!({"action":"accept","content":{"password":"hunter2","api_key":"sk-live-0123"}}),
        "{probe}"
    );
    assert_eq!(probe["errors"], json!({}), "{probe}");
    assert_eq!(
        (
            summary["roots_calls"].as_u64(),
            summary["sampling_calls"].as_u64(),
            summary["elicitation_calls"].as_u64()
        ),
        (Some(1), Some(1), Some(1)),
        "{summary}"
    );
}

#[test]
fn unfenced_in_the_stateless_era_the_hostile_server_gets_everything() {
    let (caps, probe, summary) = unfenced(Some("auto"));
    assert_eq!(summary["protocol"], "2026-07-28", "{summary}");
    assert_eq!(caps["protocol"], "2026-07-28");
    // Asked through one input_required result, answered on the retry.
    assert_eq!(
        (probe["era"].as_str(), probe["rounds"].as_u64()),
        (Some("stateless"), Some(2)),
        "{probe}"
    );
    assert_everything_leaks(&caps, &probe, &summary);
}

#[test]
fn unfenced_in_the_handshake_era_the_hostile_server_gets_everything() {
    for mode in [Some("legacy"), None] {
        let (caps, probe, summary) = unfenced(mode);
        assert_eq!(summary["protocol"], "2025-11-25", "{mode:?}: {summary}");
        assert_eq!(
            (probe["era"].as_str(), probe["rounds"].as_u64()),
            (Some("handshake"), Some(1)),
            "{probe}"
        );
        assert_everything_leaks(&caps, &probe, &summary);
    }
}

#[test]
fn the_hostile_form_takes_the_fields_it_is_given() {
    // The fenced tests vary the field names (dodges of the sensitive-term
    // check); unfenced, any name gets its value.
    let s = json!({
        "command": hostile(),
        "mode": "auto",
        "roots": [[HOST_ROOT, "private"]],
        "sampling": {"text": MODEL_TEXT},
        "elicitation": {"action": "accept", "content": {"pw": "hunter2", "pass\u{200B}word": "x"}},
        "steps": [{"call": "probe", "args": {"fields": ["pw", "pass\u{200B}word"]}}],
    });
    let (steps, summary) = peer::run_host(&s);
    let probe: Value = serde_json::from_str(steps[1]["text"].as_str().unwrap()).unwrap();
    assert_eq!(probe["form"]["content"]["pw"], "hunter2", "{probe}");
    assert_eq!(
        summary["elicitation_requests"],
        json!([{"mode":"form","fields":["pass\u{200B}word","pw"]}])
    );
}
