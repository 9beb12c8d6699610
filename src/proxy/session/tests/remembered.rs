//! A session whose `initialize` is answered from a remembered handshake
//! (`proxy::init_cache`): one server start, under the host's roots.

use std::path::PathBuf;

use serde_json::{Value, json};

use super::Sim;
use crate::proxy::init_cache::RememberedInit;

const VERSION: &str = "2025-06-18";

fn sim_answer() -> Value {
    json!({"protocolVersion":VERSION,"capabilities":{"tools":{},"logging":{}},"serverInfo":{"name":"sim","version":"1"}})
}

/// The session's first `initialize` to a server, remembered by a session
/// with a host that declares roots.
fn remembered_by_a_first_session() -> (RememberedInit, Vec<PathBuf>) {
    let mut sim = Sim::with(&[], &[], "");
    sim.host_roots = vec![sim.tree.p("a")];
    sim.handshake(VERSION, true);
    sim.settle_all();
    // Two starts: one for initialize, one under the host's roots.
    assert_eq!(sim.servers.len(), 2, "{}", sim.trace.join("\n"));
    assert_eq!(sim.remembered.len(), 1, "{}", sim.trace.join("\n"));
    let r = sim.remembered[0].clone();
    assert_eq!(r.result, sim_answer());
    assert_eq!(
        r.params["capabilities"]["roots"],
        json!({"listChanged": true})
    );
    (r, sim.host_roots.clone())
}

fn with_memory(init: RememberedInit) -> Sim {
    let tree = super::Tree::new();
    let mut config = tree.config(tree.policy(&[], ""), &[]);
    config.remembered_init = Some(init);
    Sim::new(tree, config)
}

#[test]
fn a_remembered_answer_starts_one_server_under_the_hosts_roots() {
    let (init, _) = remembered_by_a_first_session();
    let mut sim = with_memory(init);
    sim.auto_roots = false;
    sim.host_roots = vec![sim.tree.p("a")];
    sim.host(json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":VERSION,"capabilities":{"roots":{"listChanged":true}},"clientInfo":{"name":"sim","version":"1"}}}));
    // Answered at once, nothing launched.
    assert_eq!(sim.answer(&json!("init"))["result"], sim_answer());
    assert!(sim.servers.is_empty(), "{}", sim.trace.join("\n"));
    sim.host(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    // The host's first request, while its roots are asked: held.
    sim.host(json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}));
    assert!(sim.servers.is_empty(), "{}", sim.trace.join("\n"));
    assert_eq!(sim.roots_asked.len(), 1);
    sim.answer_roots();
    sim.settle_all();
    // One server, with the host's roots, answered the held request.
    assert_eq!(sim.servers.len(), 1, "{}", sim.trace.join("\n"));
    let g = sim.current().unwrap();
    assert_eq!(sim.enforced(), vec![sim.tree.p("a")]);
    assert_eq!(sim.answer(&json!(1))["result"], json!({"tools": []}));
    // It was sent the same initialize, then initialized.
    let got = &sim.servers[&g].got;
    assert_eq!(got[0]["method"], "initialize");
    assert_eq!(got[1]["method"], "notifications/initialized");
    // Same answer: nothing new to remember.
    assert!(sim.remembered.is_empty());
    assert!(sim.s.is_idle());
}

#[test]
fn another_initialize_is_a_miss_and_remembers_the_new_one() {
    let (init, _) = remembered_by_a_first_session();
    let mut sim = with_memory(init);
    sim.host_roots = vec![sim.tree.p("a")];
    // Another revision: not the remembered initialize.
    sim.handshake("2025-03-26", true);
    sim.settle_all();
    assert_eq!(sim.servers.len(), 2, "{}", sim.trace.join("\n"));
    assert_eq!(sim.remembered.len(), 1);
    assert_eq!(sim.remembered[0].params["protocolVersion"], "2025-03-26");
}

#[test]
fn a_host_without_roots_is_never_answered_from_memory() {
    let (init, _) = remembered_by_a_first_session();
    let mut sim = with_memory(init);
    sim.handshake(VERSION, false);
    sim.settle_all();
    assert_eq!(sim.servers.len(), 1);
    // Nothing remembered either: a host without roots needs no memory.
    assert!(sim.remembered.is_empty());
}

#[test]
fn a_server_that_now_answers_otherwise_is_remembered_anew() {
    let (mut init, _) = remembered_by_a_first_session();
    init.result["serverInfo"]["version"] = json!("0");
    let told = init.result.clone();
    let mut sim = with_memory(init);
    sim.host_roots = vec![sim.tree.p("a")];
    sim.handshake(VERSION, true);
    sim.settle_all();
    // The host got the remembered answer; the one server's own answer is
    // remembered for next time.
    assert_eq!(sim.answer(&json!("init"))["result"], told);
    assert_eq!(sim.servers.len(), 1, "{}", sim.trace.join("\n"));
    assert_eq!(sim.remembered.len(), 1);
    assert_eq!(sim.remembered[0].result, sim_answer());
}

#[test]
fn a_host_that_never_gives_its_roots_gets_a_server_after_the_timeout() {
    let (init, _) = remembered_by_a_first_session();
    let mut sim = with_memory(init);
    sim.auto_roots = false;
    sim.host(json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":VERSION,"capabilities":{"roots":{"listChanged":true}},"clientInfo":{"name":"sim","version":"1"}}}));
    sim.host(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    sim.host(json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}));
    assert!(sim.servers.is_empty());
    // The roots never come: after limits.initialize_timeout_ms, one
    // server with the roots known (none) answers.
    while sim.servers.is_empty() && sim.jump_to_next_timer() {}
    sim.settle_all();
    assert_eq!(sim.servers.len(), 1, "{}", sim.trace.join("\n"));
    assert_eq!(sim.answer(&json!(1))["result"], json!({"tools": []}));
}

#[test]
fn a_first_server_that_cannot_start_without_its_roots_is_started_again_under_them() {
    // obsidian-mcp VAULT, a database in DB_URL: the first server, started
    // before the host said its roots, exits before answering initialize.
    let mut sim = Sim::with(&[], &[], "");
    sim.host_roots = vec![sim.tree.p("a")];
    sim.script.push_back(super::Launch::Mute);
    sim.host(json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":VERSION,"capabilities":{"roots":{"listChanged":true}},"clientInfo":{"name":"sim","version":"1"}}}));
    sim.serve_all();
    let first = sim.newest();
    assert!(sim.enforced().is_empty());
    sim.crash(first, 1);
    // The host's initialize is answered by rootfence, the session goes on.
    let init = sim.answer(&json!("init"));
    assert_eq!(init["result"]["protocolVersion"], VERSION, "{init}");
    // Only what rootfence keeps itself is promised.
    assert_eq!(
        init["result"]["capabilities"],
        json!({"logging": {}}),
        "{init}"
    );
    assert!(sim.s.fleet.ending().is_none(), "{}", sim.trace.join("\n"));
    sim.host(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    sim.host(json!({"jsonrpc":"2.0","id":1,"method":"tools/list"}));
    sim.settle_all();
    // One more server, under the host's roots, was sent the same
    // initialize and answered the host's call.
    let g = sim.current().expect("a server serves");
    assert_ne!(g, first);
    assert_eq!(sim.enforced(), vec![sim.tree.p("a")]);
    assert_eq!(sim.servers[&g].got[0]["method"], "initialize");
    assert_eq!(sim.answer(&json!(1))["result"], json!({"tools": []}));
    // The tools it offers, not promised, are announced to the host.
    assert!(
        sim.host_got
            .iter()
            .any(|m| m["method"] == "notifications/tools/list_changed"),
        "{}",
        sim.trace.join("\n")
    );
    assert!(
        !sim.host_got
            .iter()
            .any(|m| m["method"] == "notifications/prompts/list_changed"),
    );
    // Its own answer is remembered: the next session starts it once.
    assert_eq!(sim.remembered.len(), 1, "{}", sim.trace.join("\n"));
    assert_eq!(sim.remembered[0].result, sim_answer());
}

#[test]
fn a_first_server_that_dies_without_roots_from_the_host_still_ends_the_session() {
    // No host roots to wait for: nothing would change, so the session ends.
    let mut sim = Sim::with(&["a"], &[], "");
    sim.script.push_back(super::Launch::Mute);
    sim.host(json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":VERSION,"capabilities":{},"clientInfo":{"name":"sim","version":"1"}}}));
    sim.serve_all();
    let first = sim.newest();
    sim.crash(first, 1);
    assert!(sim.answer(&json!("init"))["error"].is_object());
    assert!(sim.s.fleet.ending().is_some());
}
