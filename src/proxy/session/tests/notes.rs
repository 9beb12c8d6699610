//! rootfence's own warnings reach the host as MCP log messages: after its
//! handshake, once each, at the level it asked for; rootfence offers
//! logging when the server does not; the error that ends a session names
//! the last denial, also after every restart is used up.

use serde_json::{Value, json};

use super::{Event, ServerEvent, Sim};

const VERSION: &str = "2025-06-18";
const HINT: &str = "the sandbox refused /srv/data/x.db (not granted); to allow it add `[runtime] read = [\"/srv/data/x.db\"]` (or `write`) to the policy, or give it as a root";

/// rootfence's log messages the host received.
fn notes(sim: &Sim) -> Vec<String> {
    sim.host_got
        .iter()
        .filter(|m| m["method"] == "notifications/message" && m["params"]["logger"] == "rootfence")
        .map(|m| {
            assert_eq!(m["params"]["level"], "warning", "{m}");
            m["params"]["data"].as_str().unwrap_or_default().to_string()
        })
        .collect()
}

fn denied(sim: &mut Sim, hint: &str) {
    let g = sim.newest();
    sim.event(Event::Server(ServerEvent::Denied(g, hint.to_string())));
}

#[test]
fn a_denial_reaches_the_host_once_its_handshake_is_through_and_once_only() {
    let mut sim = Sim::with(&["a"], &[], "");
    sim.host(json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":VERSION,"capabilities":{},"clientInfo":{"name":"sim","version":"1"}}}));
    sim.serve_all();
    denied(&mut sim, HINT);
    // Before the host's `initialized`, nothing but the answer.
    assert!(notes(&sim).is_empty(), "{}", sim.trace.join("\n"));
    sim.host(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    assert_eq!(notes(&sim), vec![format!("rootfence: {HINT}")]);
    // The same denial again (from the reaper at exit): not said twice.
    denied(&mut sim, HINT);
    assert_eq!(notes(&sim).len(), 1);
    // A notification: it answers nothing, and the answer came first.
    let first_note = sim
        .host_got
        .iter()
        .position(|m| m["method"] == "notifications/message")
        .unwrap();
    let init_answer = sim.host_got.iter().position(|m| m["id"] == "init").unwrap();
    assert!(init_answer < first_note);
}

#[test]
fn rootfence_offers_logging_when_the_server_has_none_and_keeps_its_level() {
    let mut sim = Sim::with(&["a"], &[], "");
    sim.no_logging = true;
    sim.handshake(VERSION, false);
    let init = sim.answer(&json!("init"));
    assert_eq!(
        init["result"]["capabilities"]["logging"],
        json!({}),
        "{init}"
    );
    assert_eq!(init["result"]["capabilities"]["tools"], json!({}));
    // The host's level is rootfence's to keep: answered, not forwarded.
    sim.host(
        json!({"jsonrpc":"2.0","id":5,"method":"logging/setLevel","params":{"level":"error"}}),
    );
    sim.serve_all();
    assert_eq!(sim.answer(&json!(5))["result"], json!({}));
    let g = sim.current().unwrap();
    assert!(
        !sim.servers[&g]
            .got
            .iter()
            .any(|m| m["method"] == "logging/setLevel"),
        "{}",
        sim.trace.join("\n")
    );
    // A warning under the host's level is not sent.
    denied(&mut sim, HINT);
    assert!(notes(&sim).is_empty());
}

#[test]
fn a_server_that_logs_itself_gets_the_hosts_level_and_the_answer_is_untouched() {
    let mut sim = Sim::with(&["a"], &[], "");
    sim.handshake(VERSION, false);
    let init = sim.answer(&json!("init"));
    assert_eq!(
        init["result"]["capabilities"],
        json!({"tools":{},"logging":{}})
    );
    sim.host(
        json!({"jsonrpc":"2.0","id":5,"method":"logging/setLevel","params":{"level":"warning"}}),
    );
    sim.serve_all();
    let g = sim.current().unwrap();
    assert!(
        sim.servers[&g]
            .got
            .iter()
            .any(|m| m["method"] == "logging/setLevel")
    );
    denied(&mut sim, HINT);
    assert_eq!(notes(&sim).len(), 1);
}

#[test]
fn the_error_after_every_restart_is_used_up_names_the_last_denial() {
    let mut sim = Sim::with(&["a"], &[], "max_restarts = 1\n");
    sim.handshake(VERSION, false);
    // A call in flight when the server dies of what it was refused: its
    // error names the denial.
    let g = sim.current().unwrap();
    sim.host(json!({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"slow","arguments":{}}}));
    sim.serve_all();
    denied(&mut sim, HINT);
    // The restarted server never gets through its handshake.
    sim.script.push_back(super::Launch::Mute);
    sim.crash(g, 3);
    let first = sim.answer(&json!(7));
    assert!(
        first["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains(HINT),
        "{first}"
    );
    // A call held for the restarted server, which dies too: the session
    // ends, and the host's error names the last denial, not only the limit.
    sim.advance(1000);
    sim.host(
        json!({"jsonrpc":"2.0","id":8,"method":"tools/call","params":{"name":"x","arguments":{}}}),
    );
    let g2 = sim.newest();
    assert_ne!(g, g2, "{}", sim.trace.join("\n"));
    sim.crash(g2, 3);
    let answer: Value = sim.answer(&json!(8));
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("max_restarts = 1 is used up") && message.contains(HINT),
        "{answer}\n{}",
        sim.trace.join("\n")
    );
}
