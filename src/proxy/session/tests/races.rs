//! Each known race of the session as a scenario, with no process and no
//! sleep: the same races `tests/run/races.rs` plays with the real binary,
//! and the ones read from the code.

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde_json::{Value, json};

use super::{Launch, Sim};
use crate::proxy::message::code;
use crate::proxy::session::{Ending, Event, ExitInfo, Gone, LaunchFailure, ServerEnd, Stop};

fn set(sim: &Sim, names: &[&str]) -> BTreeSet<PathBuf> {
    names.iter().map(|n| sim.tree.p(n)).collect()
}

fn paths(sim: &Sim, names: &[&str]) -> Vec<PathBuf> {
    names.iter().map(|n| sim.tree.p(n)).collect()
}

fn error_message(v: &Value) -> String {
    v["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("expected an error: {v}"))
        .to_string()
}

/// A session with host roots `roots`, through its handshake and settled.
fn running(roots: &[&str], ports: &[u16], extra: &str) -> Sim {
    let mut sim = Sim::with(&[], ports, extra);
    sim.host_roots = paths(&sim, roots);
    sim.handshake("2025-06-18", true);
    sim.settle_all();
    assert_eq!(
        sim.enforced(),
        paths(&sim, roots),
        "{}",
        sim.trace.join("\n")
    );
    sim
}

#[test]
fn a_root_revoked_while_its_rebuild_starts_is_never_promoted() {
    let mut sim = running(&["a"], &[], "");
    let first = sim.current().unwrap();
    sim.script.push_back(Launch::Slow);
    sim.set_roots(&["a", "b"]);
    let rising = sim.newest();
    assert_ne!(rising, first);
    assert_eq!(sim.servers[&rising].roots, set(&sim, &["a", "b"]));
    // A request while the A+B server starts: held.
    sim.call(json!(1), "echo");
    assert!(sim.answers_to(&json!(1)).is_empty());
    // Back to A: the A+B server is killed before it ever served.
    sim.set_roots(&["a"]);
    assert_eq!(sim.servers[&rising].stop, Some(Stop::Kill));
    assert_eq!(sim.current(), Some(first));
    // The held request went to the A server.
    sim.serve(first);
    assert_eq!(
        sim.answer(&json!(1))["result"]["content"][0]["text"],
        format!("gen {first}")
    );
    sim.start(rising);
    sim.settle_all();
    assert_eq!(sim.current(), Some(first));
    assert_eq!(sim.enforced(), paths(&sim, &["a"]));
    let r = &sim.servers[&rising];
    assert_eq!(r.host_requests, 0, "{:?}", r.got);
    assert!(
        r.got
            .iter()
            .all(|m| m["method"] != "notifications/roots/list_changed"),
        "{:?}",
        r.got
    );
}

#[test]
fn a_policy_edit_removing_a_port_is_applied_when_host_roots_arrive_in_its_debounce() {
    let extra = "rebuild_debounce_ms = 1000\n";
    let mut sim = running(&["a"], &[8080], extra);
    let first = sim.current().unwrap();
    assert_eq!(sim.servers[&first].ports, BTreeSet::from([8080]));
    let edited = sim.tree.policy(&[], extra);
    sim.event(Event::PolicyChanged(Ok(Box::new(edited))));
    sim.advance(100);
    // Same roots, answered within the edit's debounce.
    sim.set_roots(&["a"]);
    assert_eq!(
        sim.servers[&first].stop,
        Some(Stop::Kill),
        "the port was revoked: {}",
        sim.trace.join("\n")
    );
    sim.settle_all();
    let now = sim.current().unwrap();
    assert_ne!(now, first);
    assert!(sim.servers[&now].ports.is_empty());
}

#[test]
fn a_revocation_is_not_announced_before_the_revoked_server_exited() {
    let mut sim = running(&["a", "b"], &[], "");
    let first = sim.current().unwrap();
    sim.call(json!(1), "slow");
    sim.set_roots(&["a"]);
    // Killed, its request answered with the reason.
    assert_eq!(sim.servers[&first].stop, Some(Stop::Kill));
    let msg = error_message(&sim.answer(&json!(1)));
    assert!(msg.contains("revoked"), "{msg}");
    assert!(
        msg.contains(&sim.tree.p("b").display().to_string()),
        "{msg}"
    );
    // The new one is up but not promoted while the old one runs.
    let next = sim.newest();
    sim.serve_all();
    sim.call(json!(2), "echo");
    assert_eq!(sim.current(), None);
    assert!(sim.answers_to(&json!(2)).is_empty());
    assert!(
        sim.servers[&next]
            .got
            .iter()
            .all(|m| m["method"] != "notifications/roots/list_changed")
    );
    sim.reap();
    assert_eq!(sim.current(), Some(next));
    sim.serve_all();
    assert_eq!(
        sim.answer(&json!(2))["result"]["content"][0]["text"],
        format!("gen {next}")
    );
    assert!(
        sim.servers[&next]
            .got
            .iter()
            .any(|m| m["method"] == "notifications/roots/list_changed")
    );
}

#[test]
fn a_growing_change_drains_instead() {
    let mut sim = running(&["a"], &[], "");
    let first = sim.current().unwrap();
    sim.call(json!(1), "slow");
    sim.set_roots(&["a", "b"]);
    sim.serve_all();
    let next = sim.current().unwrap();
    assert_ne!(next, first);
    assert_eq!(sim.servers[&first].stop, None, "draining, not stopped");
    sim.finish(first);
    assert_eq!(
        sim.answer(&json!(1))["result"]["content"][0]["text"],
        "slow done"
    );
    assert!(matches!(sim.servers[&first].stop, Some(Stop::Graceful(_))));
}

#[test]
fn a_drain_that_times_out_answers_with_an_error() {
    let mut sim = running(&["a"], &[], "");
    sim.call(json!(1), "slow");
    sim.set_roots(&["a", "b"]);
    sim.serve_all();
    sim.advance(299);
    assert!(sim.answers_to(&json!(1)).is_empty());
    sim.advance(1);
    let msg = error_message(&sim.answer(&json!(1)));
    assert!(msg.contains("did not finish in time"), "{msg}");
}

#[test]
fn an_initialize_never_answered_gets_an_error_after_the_timeout() {
    let mut sim = Sim::with(&["a"], &[], "");
    sim.script.push_back(Launch::Mute);
    sim.host(json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{}}}));
    sim.serve_all();
    sim.advance(999);
    assert!(sim.answers_to(&json!("init")).is_empty());
    sim.advance(1);
    let msg = error_message(&sim.answer(&json!("init")));
    assert!(msg.contains("limits.initialize_timeout_ms = 1000"), "{msg}");
    assert!(matches!(sim.s.ending(), Some(Ending::LaunchFailed(_))));
    sim.reap();
    assert!(sim.s.finished());
}

#[test]
fn a_replayed_initialize_never_answered_fails_closed() {
    let mut sim = running(&["a"], &[], "");
    let first = sim.current().unwrap();
    sim.script.push_back(Launch::Mute);
    sim.set_roots(&["a", "b"]);
    sim.call(json!(1), "echo");
    sim.serve_all();
    sim.advance(1000);
    assert!(
        matches!(
            sim.s.ending(),
            Some(Ending::LaunchFailed(LaunchFailure::ReplayTimeout {
                timeout_ms: 1000
            }))
        ),
        "{:?}",
        sim.s.ending()
    );
    assert_eq!(sim.answer(&json!(1))["error"]["code"], code::SERVER_GONE);
    assert!(sim.servers[&first].stop.is_some());
    sim.reap();
    assert!(sim.s.finished());
}

#[test]
fn a_server_that_closes_stdout_is_stopped_answered_and_restarted() {
    let mut sim = running(&["a"], &[], "");
    let first = sim.current().unwrap();
    sim.call(json!(1), "slow");
    sim.close_stdout(first);
    // A moment to end on its own (its exit status says why), then killed.
    assert!(
        matches!(sim.servers[&first].stop, Some(Stop::KillSoon(_))),
        "{:?}",
        sim.servers[&first].stop
    );
    sim.call(json!(2), "echo");
    sim.reap();
    let msg = error_message(&sim.answer(&json!(1)));
    assert!(msg.contains("closed its stdout"), "{msg}");
    sim.settle_all();
    let next = sim.current().unwrap();
    assert_ne!(next, first);
    assert_eq!(
        sim.answer(&json!(2))["result"]["content"][0]["text"],
        format!("gen {next}")
    );
    assert_eq!(sim.s.fleet.restarts, 1);
}

#[test]
fn a_clean_exit_after_stdout_closed_follows_the_restart_policy() {
    // on-failure: a server that exits 0 is not restarted.
    let mut sim = running(&["a"], &[], "");
    let first = sim.current().unwrap();
    sim.close_stdout(first);
    sim.crash(first, 0);
    assert!(
        matches!(
            sim.s.ending(),
            Some(Ending::ServerEnded(ServerEnd::Ended {
                gone: Gone::Exited(Some(ExitInfo::Code(0))),
                ..
            }))
        ),
        "{:?}",
        sim.s.ending()
    );
    let why = sim.s.ending().map(|e| match e {
        Ending::ServerEnded(why) => why.to_string(),
        other => format!("{other:?}"),
    });
    assert_eq!(why.as_deref(), Some("the server exited (exit code 0)"));
}

#[test]
fn ids_equal_as_json_numbers_are_one_id() {
    let mut sim = running(&["a"], &[], "");
    sim.host_raw(r#"{"jsonrpc":"2.0","id":0,"method":"tools/call","params":{"name":"slow"}}"#);
    sim.host_raw(r#"{"jsonrpc":"2.0","id":-0,"method":"ping"}"#);
    let dup = sim.host_raw.last().unwrap().clone();
    assert!(dup.contains(r#""id":-0"#), "{dup}");
    assert!(dup.contains("already in use"), "{dup}");
    sim.serve_all();
    sim.finish(sim.current().unwrap());
    let last = sim.host_raw.last().unwrap();
    assert!(
        last.contains(r#""id":0"#) && last.contains("slow done"),
        "{last}"
    );
}

#[test]
fn a_crash_during_a_rebuild_keeps_the_new_target() {
    let mut sim = running(&["a"], &[], "");
    let first = sim.current().unwrap();
    let launched = sim.servers.len();
    sim.script.push_back(Launch::Slow);
    sim.set_roots(&["a", "b"]);
    let rising = sim.newest();
    sim.crash(first, 3);
    // The rising server takes over: no restart of the old roots.
    sim.start(rising);
    sim.settle_all();
    assert_eq!(sim.current(), Some(rising));
    assert_eq!(sim.enforced(), paths(&sim, &["a", "b"]));
    assert_eq!(sim.s.fleet.restarts, 0);
    assert_eq!(sim.servers.len(), launched + 1, "nothing else launched");
}

#[test]
fn a_restart_launches_the_target_not_the_last_enforced_plan() {
    let mut sim = running(&["a"], &[], "");
    let first = sim.current().unwrap();
    let launched = sim.servers.len();
    sim.crash(first, 3);
    // During the backoff the host adds a root.
    sim.set_roots(&["a", "b"]);
    sim.settle_all();
    let next = sim.current().unwrap();
    assert_eq!(sim.servers[&next].roots, set(&sim, &["a", "b"]));
    assert_eq!(sim.servers.len(), launched + 1, "one launch, of the target");
}

#[test]
fn a_change_before_the_first_handshake_is_applied() {
    let mut sim = Sim::with(&["a", "b"], &[], "");
    sim.script.push_back(Launch::Slow);
    sim.host(json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{}}}));
    let first = sim.newest();
    assert_eq!(sim.servers[&first].roots, set(&sim, &["a", "b"]));
    std::fs::rename(sim.tree.p("b"), sim.tree.p("b-moved")).unwrap();
    sim.event(Event::RootsMaybeChanged);
    assert_eq!(sim.servers[&first].stop, Some(Stop::Kill));
    sim.settle_all();
    // The host's initialize was answered once, by a server holding A.
    let init = sim.answer(&json!("init"));
    assert_eq!(init["result"]["serverInfo"]["name"], "sim", "{init}");
    let now = sim.current().unwrap();
    assert_eq!(sim.servers[&now].roots, set(&sim, &["a"]));
}

#[test]
fn a_growing_change_before_the_first_handshake_waits_for_it() {
    let mut sim = Sim::with(&["a"], &[], "");
    sim.script.push_back(Launch::Slow);
    sim.host(json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{}}}));
    let first = sim.newest();
    let edited = sim.tree.policy(&[443], "");
    sim.event(Event::PolicyChanged(Ok(Box::new(edited))));
    assert_eq!(
        sim.servers.len(),
        1,
        "no replacement while initialize is in flight"
    );
    sim.start(first);
    assert_eq!(
        sim.answer(&json!("init"))["result"]["serverInfo"]["name"],
        "sim"
    );
    sim.host(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    sim.settle_all();
    let now = sim.current().unwrap();
    assert_ne!(now, first);
    assert_eq!(sim.servers[&now].ports, BTreeSet::from([443]));
}

#[test]
fn batches_complete_with_nested_and_cancelled_members() {
    let mut sim = Sim::with(&[], &[], "");
    sim.host_roots = paths(&sim, &["a"]);
    sim.handshake("2025-03-26", true);
    sim.settle_all();
    sim.host_raw(r#"[{"jsonrpc":"2.0","id":"p","method":"ping"},[{"jsonrpc":"2.0","id":"n","method":"ping"}]]"#);
    sim.serve_all();
    let reply: Value = serde_json::from_str(sim.host_raw.last().unwrap()).unwrap();
    let arr = reply.as_array().unwrap();
    assert_eq!(arr.len(), 2, "{reply}");
    assert!(arr.iter().any(|m| m["id"] == "p"));
    assert!(
        arr.iter()
            .any(|m| m["error"]["code"] == code::INVALID_REQUEST)
    );
    // Held while the host's roots are asked for; one member cancelled.
    sim.auto_roots = false;
    sim.set_roots(&["a"]);
    let before = sim.host_raw.len();
    sim.host_raw(r#"[{"jsonrpc":"2.0","id":"h1","method":"ping"},{"jsonrpc":"2.0","id":"h2","method":"tools/call","params":{"name":"slow"}}]"#);
    sim.host(
        json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"h2"}}),
    );
    sim.answer_roots();
    sim.settle_all();
    let replies: Vec<&String> = sim.host_raw[before..]
        .iter()
        .filter(|l| l.starts_with('['))
        .collect();
    assert_eq!(replies.len(), 1, "{replies:?}");
    let reply: Value = serde_json::from_str(replies[0]).unwrap();
    assert_eq!(reply, json!([{"jsonrpc":"2.0","id":"h1","result":{}}]));
    assert!(sim.s.is_idle());
}

#[test]
fn a_cancelled_request_in_flight_is_forgotten() {
    let mut sim = running(&["a"], &[], "");
    let g = sim.current().unwrap();
    sim.call(json!(1), "slow");
    sim.host(json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}));
    assert!(
        sim.servers[&g]
            .got
            .iter()
            .any(|m| m["method"] == "notifications/cancelled")
    );
    assert!(sim.s.is_idle());
    // An answer after all is dropped.
    sim.finish(g);
    assert!(sim.answers_to(&json!(1)).is_empty());
}

#[test]
fn host_progress_goes_to_the_generation_that_asked() {
    let mut sim = running(&["a"], &[], "");
    let first = sim.current().unwrap();
    sim.call(json!(1), "slow");
    sim.server_asks(first);
    sim.set_roots(&["a", "b"]);
    sim.serve_all();
    let next = sim.current().unwrap();
    assert_ne!(next, first);
    // The new server asks too, with the same token as the old one.
    sim.server_asks(next);
    let tokens: Vec<Value> = sim
        .server_asks
        .iter()
        .filter_map(|(_, t)| t.clone())
        .collect();
    assert_eq!(tokens.len(), 2);
    assert_ne!(tokens[0], tokens[1], "the host sees distinct tokens");
    sim.host_answers_servers();
    sim.serve_all();
    for g in [first, next] {
        let answered = &sim.servers[&g].answered;
        assert_eq!(answered.len(), 1, "generation {g}: {answered:?}");
        assert_eq!(answered[0].1.len(), 1, "generation {g} got its progress");
        assert_eq!(answered[0].1[0]["progressToken"], 1);
    }
}

#[test]
fn a_policy_edit_changing_no_right_does_not_relaunch() {
    let mut sim = running(&["a"], &[], "");
    let first = sim.current().unwrap();
    let launched = sim.servers.len();
    let edited = sim.tree.policy(&[], "max_restarts = 7\n");
    sim.event(Event::PolicyChanged(Ok(Box::new(edited))));
    sim.settle_all();
    assert_eq!(sim.current(), Some(first));
    assert_eq!(sim.servers.len(), launched);
}

#[test]
fn a_policy_edit_changing_what_the_server_is_offered_relaunches() {
    let tree = super::Tree::new();
    let policy = tree.policy(&[], "[sampling]\nallow = true\n");
    let config = tree.config(policy, &["a"]);
    let mut sim = Sim::new(tree, config);
    sim.host(json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"sampling":{}}}}));
    sim.serve_all();
    sim.host(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    sim.settle_all();
    let first = sim.current().unwrap();
    let init = |sim: &Sim, g| {
        sim.servers[&g]
            .got
            .iter()
            .find(|m| m["method"] == "initialize")
            .cloned()
            .unwrap()
    };
    assert!(
        init(&sim, first)
            .pointer("/params/capabilities/sampling")
            .is_some()
    );
    let edited = sim.tree.policy(&[], "[sampling]\nallow = false\n");
    sim.event(Event::PolicyChanged(Ok(Box::new(edited))));
    sim.settle_all();
    let now = sim.current().unwrap();
    assert_ne!(now, first);
    assert!(
        init(&sim, now)
            .pointer("/params/capabilities/sampling")
            .is_none()
    );
    // Not a revocation: the old one was closed gracefully.
    assert!(matches!(sim.servers[&first].stop, Some(Stop::Graceful(_))));
}

#[test]
fn a_host_id_equal_to_one_of_rootfences_is_sent_on_the_hosts_behalf() {
    let mut sim = running(&["a"], &[], "");
    sim.host(json!({"jsonrpc":"2.0","id":"h-level","method":"logging/setLevel","params":{"level":"info"}}));
    sim.serve_all();
    // A rebuild: the new server is replayed the level under rootfence's id,
    // and does not answer yet.
    sim.set_roots(&["a", "b"]);
    let next = sim.newest();
    sim.serve(next);
    let own = sim.servers[&next]
        .inbox
        .iter()
        .find(|m| m["method"] == "logging/setLevel")
        .map(|m| m["id"].clone())
        .expect("the replayed level waits in the inbox");
    // The host happens to use that very id.
    sim.host(json!({"jsonrpc":"2.0","id":own,"method":"tools/call","params":{"name":"echo"}}));
    let sent = sim.servers[&next]
        .inbox
        .iter()
        .find(|m| m["method"] == "tools/call")
        .cloned()
        .unwrap();
    assert_ne!(sent["id"], own, "sent under another id: {sent}");
    sim.serve(next);
    let answers = sim.answers_to(&own);
    assert_eq!(answers.len(), 1, "{answers:?}");
    assert_eq!(
        answers[0]["result"]["content"][0]["text"],
        format!("gen {next}")
    );
    assert!(sim.s.is_idle());
}

#[test]
fn host_eof_lets_requests_in_flight_finish_and_delivers_held_ones() {
    let mut sim = running(&["a"], &[], "");
    let g = sim.current().unwrap();
    sim.call(json!(1), "slow");
    sim.auto_roots = false;
    sim.set_roots(&["a"]);
    // Held while the host is asked for its roots.
    sim.call(json!(2), "echo");
    assert!(sim.answers_to(&json!(2)).is_empty());
    sim.event(Event::HostEof);
    // The host can answer nothing more: its roots are given up (fail
    // closed: the server holding them is killed, its request answered
    // with why), and what the host sent is delivered before the session
    // ends.
    assert_eq!(sim.servers[&g].stop, Some(Stop::Kill));
    assert!(error_message(&sim.answer(&json!(1))).contains("revoked"));
    sim.settle_all();
    let two = sim.answer(&json!(2));
    assert!(two.get("error").is_none(), "{two}");
    let last = sim.newest();
    assert_ne!(last, g);
    assert!(sim.servers[&last].roots.is_empty());
    assert!(sim.s.finished(), "{}", sim.trace.join("\n"));
}

#[test]
fn host_eof_keeps_the_server_until_what_it_was_sent_is_answered() {
    let mut sim = Sim::with(&["a"], &[], "");
    sim.handshake("2025-06-18", false);
    let g = sim.current().unwrap();
    sim.call(json!(1), "slow");
    sim.serve(g);
    sim.event(Event::HostEof);
    // Its stdin stays open: rootfence may still owe it answers (its
    // roots/list), and the call it was sent is answered first.
    assert_eq!(sim.servers[&g].stop, None);
    // What it asks the host meanwhile is refused at once, not left waiting.
    sim.server_asks(g);
    sim.serve(g);
    let asked = sim.servers[&g]
        .got
        .iter()
        .find(|m| m["id"] == json!(1) && m.get("error").is_some());
    assert!(
        asked.is_some_and(|m| m["error"]["message"]
            .as_str()
            .unwrap_or("")
            .contains("host closed")),
        "{:?}",
        sim.servers[&g].got
    );
    assert!(sim.host_got.iter().all(|m| m["method"] != "ping"));
    sim.finish(g);
    let one = sim.answer(&json!(1));
    assert!(one.get("error").is_none(), "{one}");
    assert!(matches!(sim.servers[&g].stop, Some(Stop::Graceful(_))));
    sim.reap();
    assert!(sim.s.finished());
}

#[test]
fn a_host_that_writes_its_session_and_closes_at_once_loses_nothing() {
    // What a pipe does: every line written, then end of file, before the
    // server has answered anything.
    let mut sim = Sim::with(&["a"], &[], "");
    sim.host_burst(
        &[
            json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"pipe","version":"1"}}}),
            json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
            json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}}),
            json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{}}}),
        ],
        true,
    );
    assert!(!sim.s.finished());
    sim.settle_all();
    let init = sim.answer(&json!("init"));
    assert!(
        init.get("result").is_some(),
        "{init}\n{}",
        sim.trace.join("\n")
    );
    for id in [json!(1), json!(2)] {
        let a = sim.answer(&id);
        assert!(a.get("error").is_none(), "{a}\n{}", sim.trace.join("\n"));
    }
    assert!(sim.s.finished());
}

#[test]
fn a_host_that_closes_with_nothing_held_ends_the_session_at_once() {
    let mut sim = running(&["a"], &[], "");
    let g = sim.current().unwrap();
    sim.event(Event::HostEof);
    assert!(matches!(sim.servers[&g].stop, Some(Stop::Graceful(_))));
    sim.reap();
    assert!(sim.s.finished());
}

#[test]
fn what_the_host_sent_before_closing_waits_at_most_the_initialize_timeout() {
    let mut sim = Sim::with(&["a"], &[], "");
    sim.script.push_back(Launch::Slow);
    sim.host(json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"pipe","version":"1"}}}));
    sim.call(json!(1), "echo");
    sim.event(Event::HostEof);
    // The server never starts: the wait ends, and nothing is left unanswered.
    sim.advance(60_000);
    sim.reap();
    assert!(sim.answer(&json!("init")).get("error").is_some());
    assert!(sim.answer(&json!(1)).get("error").is_some());
    assert!(sim.s.finished(), "{}", sim.trace.join("\n"));
}

#[test]
fn a_failed_launch_fails_closed() {
    let mut sim = running(&["a"], &[], "");
    sim.script.push_back(Launch::Fail);
    sim.set_roots(&["a", "b"]);
    sim.call(json!(1), "echo");
    assert!(matches!(sim.s.ending(), Some(Ending::LaunchFailed(_))));
    assert_eq!(sim.answer(&json!(1))["error"]["code"], code::SERVER_GONE);
    sim.reap();
    assert!(sim.s.finished());
}

#[test]
fn a_plan_that_comes_after_a_newer_one_is_dropped() {
    let mut sim = running(&["a"], &[], "");
    sim.hold_plans = true;
    sim.set_roots(&["a", "b"]);
    // Held while the host's roots are planned.
    sim.call(json!(1), "echo");
    assert!(sim.answers_to(&json!(1)).is_empty());
    sim.set_roots(&["a"]);
    assert_eq!(sim.plans_held.len(), 2, "{}", sim.trace.join("\n"));
    // The newer plan comes first; the older one, granting B, comes last.
    sim.deliver_plans(&[1, 0]);
    sim.settle_all();
    assert_eq!(sim.enforced(), paths(&sim, &["a"]));
    let b = sim.tree.p("b");
    assert!(
        sim.servers.values().all(|s| !s.roots.contains(&b)),
        "{}",
        sim.trace.join("\n")
    );
    assert_eq!(sim.answers_to(&json!(1)).len(), 1);
    assert!(sim.s.is_idle());
}

#[test]
fn a_plan_that_does_not_come_stalls_only_itself() {
    let mut sim = running(&["a"], &[], "");
    let g = sim.current().unwrap();
    sim.hold_plans = true;
    let policy = sim.tree.policy(&[1001], "");
    sim.event(Event::PolicyChanged(Ok(Box::new(policy))));
    assert_eq!(sim.plans_held.len(), 1, "{}", sim.trace.join("\n"));
    // The server in place answers meanwhile.
    sim.call(json!(1), "echo");
    sim.serve(g);
    assert_eq!(
        sim.answer(&json!(1))["result"]["content"][0]["text"],
        format!("gen {g}")
    );
    // The plan comes: the port opened relaunches the server.
    sim.deliver_plans(&[]);
    sim.settle_all();
    let now = sim.current().unwrap();
    assert_ne!(now, g);
    assert_eq!(sim.servers[&now].ports, [1001].into_iter().collect());
}

#[test]
fn host_roots_whose_plan_does_not_come_in_time_are_dropped() {
    let mut sim = running(&["a"], &[], "");
    let g = sim.current().unwrap();
    sim.hold_plans = true;
    sim.set_roots(&["b"]);
    sim.call(json!(1), "echo");
    assert!(sim.answers_to(&json!(1)).is_empty());
    // The plan of the host's answer hangs past limits.roots_timeout_ms:
    // the host's roots are dropped, and the plan without them is taken.
    sim.advance(1000);
    assert_eq!(sim.plans_held.len(), 2, "{}", sim.trace.join("\n"));
    sim.deliver_plans(&[1]);
    // A, which the host no longer gives, is revoked.
    assert_eq!(sim.servers[&g].stop, Some(Stop::Kill));
    sim.settle_all();
    assert_eq!(sim.enforced(), Vec::<std::path::PathBuf>::new());
    let b = sim.tree.p("b");
    assert!(sim.servers.values().all(|s| !s.roots.contains(&b)));
    assert_eq!(sim.answers_to(&json!(1)).len(), 1);
}

#[test]
fn a_root_replaced_while_a_plan_is_made_is_looked_at_by_the_next() {
    let mut sim = running(&["a", "b"], &[], "rebuild_debounce_ms = 100\n");
    sim.hold_plans = true;
    sim.set_roots(&["a", "b", "c"]);
    assert_eq!(sim.plans_held.len(), 1);
    // B is replaced by another directory under the same name while that
    // plan is made (it checks nothing).
    std::fs::rename(sim.tree.p("b"), sim.tree.p("b-moved")).unwrap();
    std::fs::create_dir(sim.tree.p("b")).unwrap();
    sim.event(Event::RootsMaybeChanged);
    sim.deliver_plans(&[]);
    // The debounced plan looks at the target's roots again: B is dropped,
    // never granted as the directory now under its name.
    sim.advance(100);
    sim.deliver_plans(&[]);
    sim.settle_all();
    assert_eq!(
        sim.enforced(),
        paths(&sim, &["a", "c"]),
        "{}",
        sim.trace.join("\n")
    );
}
