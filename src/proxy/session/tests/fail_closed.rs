//! What the relay cannot read, and what belongs to whom, as scenarios:
//! each line a peer could send to fool a parser, to reach state rootfence
//! relies on, or to keep a revoked right, and what comes of it. Every line
//! written to the host or a server is checked strictly readable (see
//! `assert_readable`), and read by the host's parsers (Python's `json` and
//! universal newlines, pydantic, the MCP SDK's parser, `JSON.parse`, node's
//! `readline`) as serde reads it (`read_by_hosts`).

use std::path::PathBuf;

use serde_json::{Value, json};

use super::{Sim, server_line};
use crate::policy::{KeyNote, PolicyError};
use crate::proxy::message::code;
use crate::proxy::session::{Event, Frame, GenId, ServerEvent, Stop};

fn paths(sim: &Sim, names: &[&str]) -> Vec<PathBuf> {
    names.iter().map(|n| sim.tree.p(n)).collect()
}

/// A session with host roots `roots`, through its handshake and settled.
fn running(roots: &[&str], extra: &str) -> Sim {
    let mut sim = Sim::with(&[], &[], extra);
    sim.host_roots = paths(&sim, roots);
    sim.handshake("2025-11-25", true);
    sim.settle_all();
    assert_eq!(sim.enforced(), paths(&sim, roots));
    sim
}

/// Server `g` writes `bytes` as one line.
fn from_server(sim: &mut Sim, g: GenId, bytes: &[u8]) {
    sim.event(Event::Server(ServerEvent::Frame(
        g,
        Frame::Line(bytes.to_vec()),
    )));
}

/// The host writes `bytes` as one line.
fn from_host(sim: &mut Sim, bytes: &[u8]) {
    sim.event(Event::Host(Frame::Line(bytes.to_vec())));
}

/// Every line the host received in the scenario, read by Python's `json`
/// and universal newlines, pydantic's reader and the MCP SDK's parser
/// (tests/peers/readers.py), `JSON.parse` and node's `readline`
/// (tests/peers/readers.js), through `scripts/differential.py`: each must
/// read what serde reads. The peers come from `tests/peers/install.sh`.
fn read_by_hosts(sim: &Sim) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let python = root.join("tests/peers/.venv/bin/python");
    assert!(
        python.exists(),
        "{} is missing: run tests/peers/install.sh (scripts/test.sh does)",
        python.display()
    );
    let dir = tempfile::tempdir().expect("temporary directory");
    let file = dir.path().join("to-host.jsonl");
    let mut lines = String::new();
    let mut norms = String::new();
    for l in &sim.host_raw {
        lines.push_str(l);
        lines.push('\n');
        norms.push_str(&crate::proxy::canonical::normal_form(
            &serde_json::from_str(l).expect("JSON"),
        ));
        norms.push('\n');
    }
    std::fs::write(&file, lines).expect("write");
    std::fs::write(dir.path().join("to-host.jsonl.serde"), norms).expect("write");
    let out = std::process::Command::new(python)
        .arg(root.join("scripts/differential.py"))
        .arg("--messages")
        .arg(&file)
        .output()
        .expect("python");
    assert!(
        out.status.success(),
        "the host's parsers read what it received otherwise:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn error(v: &Value) -> (i64, String) {
    (
        v["error"]["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("not an error: {v}")),
        v["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    )
}

/// What `g` received since `from`.
fn got_since(sim: &Sim, g: GenId, from: usize) -> Vec<Value> {
    sim.servers[&g].got[from..].to_vec()
}

#[test]
fn a_server_cannot_cancel_answer_or_report_on_rootfences_roots_list() {
    let mut sim = running(&["a", "b"], "");
    let g = sim.current().unwrap();
    sim.auto_roots = false;
    // The host removes B; rootfence asks it for its roots.
    sim.set_roots(&["a"]);
    let n = sim.roots_asked.last().and_then(Value::as_i64).unwrap();
    let seen = sim.host_raw.len();
    for params in [
        format!(r#"{{"requestId":99,"requestId":{n}}}"#),
        format!(r#"{{"requestId":{n}}}"#),
        format!(r#"{{"requestId":{n}.0}}"#),
        format!(r#"{{"requestId":{n}e0}}"#),
        format!(r#"{{"requestId":"{n}"}}"#),
        format!(r#"{{"requestId":{n},"requestId":{n}}}"#),
        format!(r#"{{"request\u0049d":{n}}}"#),
    ] {
        let line =
            format!(r#"{{"jsonrpc":"2.0","method":"notifications/cancelled","params":{params}}}"#);
        from_server(&mut sim, g, line.as_bytes());
        from_server(&mut sim, g, line.replace(':', ":\r").as_bytes());
    }
    for line in [
        format!(r#"{{"jsonrpc":"2.0","id":{n},"result":{{"roots":[]}}}}"#),
        format!(r#"{{"jsonrpc":"2.0","id":"{n}","result":{{"roots":[]}}}}"#),
        format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":{n},"progress":1}}}}"#
        ),
    ] {
        from_server(&mut sim, g, line.as_bytes());
    }
    assert_eq!(
        sim.host_raw[seen..],
        [] as [String; 0],
        "the host got a line about rootfence's own request"
    );
    // The host never answers: at the timeout the server keeps only what
    // the host cannot have revoked (here, no root at all).
    assert_eq!(sim.servers[&g].stop, None);
    sim.advance(1000);
    assert_eq!(
        sim.servers[&g].stop,
        Some(Stop::Kill),
        "{}",
        sim.trace.join("\n")
    );
    sim.settle_all();
    assert_eq!(sim.enforced(), Vec::<PathBuf>::new());
    // Host traffic goes on meanwhile.
    sim.call(json!(1), "echo");
    sim.serve_all();
    assert!(sim.answer(&json!(1))["result"].is_object());
    // A late answer still applies.
    sim.answer_roots();
    sim.settle_all();
    assert_eq!(sim.enforced(), paths(&sim, &["a"]));
    read_by_hosts(&sim);
}

#[test]
fn a_roots_answer_that_is_an_error_or_unreadable_keeps_only_the_static_roots() {
    let answers: [fn(&str) -> Vec<u8>; 4] = [
        |n| {
            format!(r#"{{"jsonrpc":"2.0","id":{n},"error":{{"code":-32603,"message":"no"}}}}"#)
                .into_bytes()
        },
        |n| {
            format!(r#"{{"jsonrpc":"2.0","id":{n},"result":{{"roots":[{{"uri":"file:///x","uri":"file:///y"}}]}}}}"#).into_bytes()
        },
        |n| {
            [
                format!(r#"{{"jsonrpc":"2.0","id":{n},"result":{{"roots":[],"n":""#).into_bytes(),
                b"\xff\"}}".to_vec(),
            ]
            .concat()
        },
        |n| format!(r#"{{"jsonrpc":"2.0","id":{n},"result":{{"roots":"none"}}}}"#).into_bytes(),
    ];
    for answer in answers {
        let mut sim = Sim::with(&["c"], &[], "");
        sim.host_roots = paths(&sim, &["a", "b"]);
        sim.handshake("2025-11-25", true);
        sim.settle_all();
        assert_eq!(sim.enforced(), paths(&sim, &["a", "b", "c"]));
        let g = sim.current().unwrap();
        sim.auto_roots = false;
        sim.set_roots(&["a"]);
        let n = sim.roots_asked.pop().unwrap().to_string();
        let bytes = answer(&n);
        from_host(&mut sim, &bytes);
        let shown = String::from_utf8_lossy(&bytes).into_owned();
        assert_eq!(sim.servers[&g].stop, Some(Stop::Kill), "{shown}");
        sim.settle_all();
        assert_eq!(sim.enforced(), paths(&sim, &["c"]), "{shown}");
        read_by_hosts(&sim);
    }
}

#[test]
fn an_unreadable_policy_edit_stops_the_server_until_one_can_be_applied() {
    let mut sim = running(&["a"], "");
    let g = sim.current().unwrap();
    sim.call(json!(1), "slow");
    sim.event(Event::PolicyChanged(Err(PolicyError::Invalid {
        file: "policy.toml".into(),
        line: 3,
        key: KeyNote(None),
        message: "expected a table".into(),
    })));
    assert_eq!(sim.servers[&g].stop, Some(Stop::Kill));
    let (c, m) = error(&sim.answer(&json!(1)));
    assert_eq!(c, code::SERVER_GONE);
    assert!(m.contains("policy file changed and cannot be read"), "{m}");
    sim.settle_all();
    assert!(sim.alive().is_empty(), "{}", sim.trace.join("\n"));
    // Meanwhile the host is answered at once.
    sim.call(json!(2), "echo");
    let (_, m) = error(&sim.answer(&json!(2)));
    assert!(m.contains("fix the policy file"), "{m}");
    // A policy that can be applied: the server is back.
    let p = sim.tree.policy(&[], "");
    sim.event(Event::PolicyChanged(Ok(Box::new(p))));
    sim.settle_all();
    assert_eq!(sim.enforced(), paths(&sim, &["a"]));
    sim.call(json!(3), "echo");
    sim.serve_all();
    assert!(
        sim.answer(&json!(3))["result"].is_object(),
        "{}",
        sim.trace.join("\n")
    );
    read_by_hosts(&sim);
}

#[test]
fn unreadable_server_lines_are_refused_to_their_sender() {
    let mut sim = running(&["a"], "");
    let g = sim.current().unwrap();
    // An answer holding invalid UTF-8 in a member rootfence does not read:
    // the host's request gets an error, never the bytes.
    sim.call(json!(1), "slow");
    from_server(
        &mut sim,
        g,
        b"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{\"content\":[],\"z\":\"\xff\xfe\"}}",
    );
    let (c, m) = error(&sim.answer(&json!(1)));
    assert_eq!(c, code::INTERNAL_ERROR);
    assert!(m.contains("not UTF-8"), "{m}");
    // A repeated key deep in a result; nesting past the limit, the id last.
    sim.call(json!(2), "slow");
    from_server(
        &mut sim,
        g,
        br#"{"jsonrpc":"2.0","id":2,"result":{"content":[{"type":"text","text":"a","text":"b"}]}}"#,
    );
    assert!(error(&sim.answer(&json!(2))).1.contains("twice"));
    sim.call(json!(3), "slow");
    let deep = format!(
        r#"{{"jsonrpc":"2.0","result":{{"x":{}{}}},"id":3}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    from_server(&mut sim, g, deep.as_bytes());
    assert!(error(&sim.answer(&json!(3))).1.contains("nested"));
    // A bare carriage return: relayed, in canonical form (one line).
    sim.call(json!(4), "slow");
    from_server(&mut sim, g, b"{\"jsonrpc\":\"2.0\",\"id\":4,\r\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"ok\\u0021\"}]}}");
    assert_eq!(sim.answer(&json!(4))["result"]["content"][0]["text"], "ok!");
    assert!(
        sim.host_raw
            .last()
            .unwrap()
            .starts_with(r#"{"jsonrpc":"2.0","id":4,"result""#)
    );
    // Its requests and notifications that cannot be read: refused back by
    // id, or dropped; none reaches the host.
    let seen = sim.host_raw.len();
    let before = sim.servers[&g].got.len();
    from_server(&mut sim, g, br#"{"jsonrpc":"2.0","id":7,"method":"sampling/createMessage","params":{"maxTokens":1,"messages":[],"maxTokens":90000}}"#);
    from_server(&mut sim, g, b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"\xff\"}}");
    from_server(&mut sim, g, br#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"\ud800"}}"#);
    from_server(
        &mut sim,
        g,
        br#"{"jsonrpc":"2.0","id":8,"method":"ping","params":{"_meta":{"x":1e400}}}"#,
    );
    assert_eq!(sim.host_raw[seen..], [] as [String; 0]);
    let got = got_since(&sim, g, before);
    let ids: Vec<&Value> = got.iter().map(|v| &v["id"]).collect();
    assert_eq!(ids, [&json!(7), &json!(8)], "{got:?}");
    assert!(
        got.iter()
            .all(|v| v["error"]["code"] == code::INVALID_REQUEST)
    );
    read_by_hosts(&sim);
}

#[test]
fn unreadable_host_lines_are_refused_to_the_host() {
    let mut sim = running(&["a"], "");
    let g = sim.current().unwrap();
    let before = sim.servers[&g].got.len();
    from_host(&mut sim, b"{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"x\":\"\xff\"}}}");
    let (c, m) = error(&sim.answer(&json!(3)));
    assert_eq!(c, code::INVALID_REQUEST);
    assert!(m.contains("not UTF-8"), "{m}");
    from_host(
        &mut sim,
        br#"{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"echo","name":"slow"}}"#,
    );
    assert!(error(&sim.answer(&json!(4))).1.contains("twice"));
    // Not JSON, with the id found before the damage.
    from_host(
        &mut sim,
        br#"{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"#,
    );
    assert_eq!(error(&sim.answer(&json!(5))).0, code::PARSE_ERROR);
    assert_eq!(got_since(&sim, g, before), [] as [Value; 0]);
    // The host's answer to a server request that cannot be read: the
    // server gets an error for its request, never the answer.
    sim.server_asks(g);
    let (hid, _) = sim.server_asks.pop().unwrap();
    let before = sim.servers[&g].got.len();
    let line = format!(r#"{{"jsonrpc":"2.0","id":{hid},"result":{{}},"result":{{"x":1}}}}"#);
    from_host(&mut sim, line.as_bytes());
    let got = got_since(&sim, g, before);
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["id"], 1);
    assert_eq!(got[0]["error"]["code"], code::INTERNAL_ERROR);
    read_by_hosts(&sim);
}

#[test]
fn over_the_limit_lines_are_answered_by_their_id_wherever_it_is() {
    let mut sim = running(&["a"], "max_message_bytes = 65536\n");
    let g = sim.current().unwrap();
    let big = "x".repeat(100_000);
    // The host's request, its id after the payload.
    let line = format!(
        r#"{{"jsonrpc":"2.0","method":"tools/call","params":{{"name":"echo","arguments":{{"b":"{big}"}}}},"id":"late"}}"#
    );
    let ident = crate::proxy::sniff::ident(line.as_bytes());
    sim.event(Event::Host(Frame::TooLong {
        len: line.len() as u64,
        ident,
    }));
    let (c, m) = error(&sim.answer(&json!("late")));
    assert_eq!(c, code::INVALID_REQUEST);
    assert!(m.contains("exceeds the limit"), "{m}");
    // The server's answer, written result first (the TypeScript SDK's order).
    sim.call(json!(9), "slow");
    let line = format!(
        r#"{{"jsonrpc":"2.0","result":{{"content":[{{"type":"text","text":"{big}"}}]}},"id":9}}"#
    );
    let ident = crate::proxy::sniff::ident(line.as_bytes());
    sim.event(Event::Server(ServerEvent::Frame(
        g,
        Frame::TooLong {
            len: line.len() as u64,
            ident,
        },
    )));
    let (c, m) = error(&sim.answer(&json!(9)));
    assert_eq!(c, code::INTERNAL_ERROR);
    assert!(m.contains("exceeds the limit"), "{m}");
    // The server's request, its id last: refused back to it.
    let before = sim.servers[&g].got.len();
    let line = format!(
        r#"{{"jsonrpc":"2.0","method":"sampling/createMessage","params":{{"m":"{big}"}},"id":77}}"#
    );
    let ident = crate::proxy::sniff::ident(line.as_bytes());
    sim.event(Event::Server(ServerEvent::Frame(
        g,
        Frame::TooLong {
            len: line.len() as u64,
            ident,
        },
    )));
    let got = got_since(&sim, g, before);
    assert_eq!((got.len(), &got[0]["id"]), (1, &json!(77)), "{got:?}");
    read_by_hosts(&sim);
}

#[test]
fn notifications_naming_ids_are_relayed_only_for_their_owner() {
    let mut sim = running(&["a"], "");
    let g = sim.current().unwrap();
    // The host's request with a progress token; the server's progress on it
    // is relayed, on any other token dropped.
    sim.host(json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","_meta":{"progressToken":"p1"}}}));
    sim.serve(g);
    let seen = sim.host_raw.len();
    for token in [json!("p1"), json!("p2"), json!(1), json!("other")] {
        sim.event(server_line(g, &json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":token,"progress":1}})));
    }
    sim.event(server_line(
        g,
        &json!({"jsonrpc":"2.0","method":"notifications/roots/list_changed"}),
    ));
    sim.event(server_line(g, &json!({"jsonrpc":"2.0","method":"notifications/elicitation/complete","params":{"elicitationId":"never-sent"}})));
    sim.event(server_line(g, &json!({"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"hi"}})));
    let got: Vec<&String> = sim.host_raw[seen..].iter().collect();
    assert_eq!(got.len(), 2, "{got:?}");
    assert!(
        got[0].contains("\"p1\"") && got[1].contains("notifications/message"),
        "{got:?}"
    );
    // A second host request with the same token in flight: refused.
    sim.host(json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","_meta":{"progressToken":"p1"}}}));
    assert_eq!(error(&sim.answer(&json!(2))).0, code::INVALID_REQUEST);
    // Once answered, the server's progress on it is dropped.
    sim.finish(g);
    let seen = sim.host_raw.len();
    sim.event(server_line(g, &json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p1","progress":2}})));
    assert_eq!(sim.host_raw.len(), seen);
    // The host's cancellations and progress naming nothing in flight.
    let before = sim.servers[&g].got.len();
    sim.host(json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"rootfence-1"}}));
    sim.host(json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":42,"progress":1}}));
    sim.host(json!({"jsonrpc":"2.0","method":"notifications/elicitation/complete","params":{"elicitationId":"e"}}));
    assert_eq!(got_since(&sim, g, before), [] as [Value; 0]);
    read_by_hosts(&sim);
}

#[test]
fn answers_under_an_integral_id_answer_that_id() {
    let mut sim = running(&["a"], "");
    let g = sim.current().unwrap();
    sim.call(json!(5), "slow");
    sim.call(json!(6), "slow");
    // `5.0` is 5 to every host; `"6"` is another id than 6.
    sim.event(server_line(
        g,
        &json!({"jsonrpc":"2.0","id":5.0,"result":{"content":[]}}),
    ));
    from_server(
        &mut sim,
        g,
        br#"{"jsonrpc":"2.0","id":"6","result":{"content":[]}}"#,
    );
    assert!(sim.answer(&json!(5))["result"].is_object());
    assert!(
        sim.host_raw.last().unwrap().contains(r#""id":5,"#),
        "{:?}",
        sim.host_raw.last()
    );
    assert!(sim.answers_to(&json!(6)).is_empty());
    read_by_hosts(&sim);
}

#[test]
fn server_ids_and_tokens_held_for_the_host_are_bounded() {
    let mut sim = running(&["a"], "");
    let g = sim.current().unwrap();
    let seen = sim.host_raw.len();
    let before = sim.servers[&g].got.len();
    let long = "i".repeat(512 * 1024);
    sim.event(server_line(
        g,
        &json!({"jsonrpc":"2.0","id":long,"method":"ping"}),
    ));
    sim.event(server_line(
        g,
        &json!({"jsonrpc":"2.0","id":1,"method":"ping","params":{"_meta":{"progressToken":long}}}),
    ));
    assert_eq!(sim.host_raw.len(), seen);
    let got = got_since(&sim, g, before);
    assert_eq!(got.len(), 2);
    assert!(
        got.iter()
            .all(|v| v["error"]["code"] == code::INVALID_REQUEST),
        "{}",
        got[1]
    );
    // At most so many wait for the host at once.
    for i in 0..crate::proxy::session::ledger::MAX_ASKED + 1 {
        sim.event(server_line(
            g,
            &json!({"jsonrpc":"2.0","id":i + 10,"method":"ping"}),
        ));
    }
    let asked = sim.host_raw[seen..].len();
    assert_eq!(asked, crate::proxy::session::ledger::MAX_ASKED);
    let last = sim.servers[&g].got.last().unwrap().clone();
    assert_eq!(last["error"]["code"], code::INVALID_REQUEST, "{last}");
    read_by_hosts(&sim);
}

#[test]
fn a_url_elicitation_inside_an_error_is_judged() {
    const REFUSED: i64 = code::POLICY_REFUSED;
    let url_error = |id: i64, url: &str| {
        json!({"jsonrpc":"2.0","id":id,"error":{"code":-32042,"message":"authorize first",
            "data":{"elicitations":[{"mode":"url","elicitationId":format!("e{id}"),"url":url,"message":"Sign in"}]}}})
    };
    // The default policy has no URL mode.
    let mut sim = running(&["a"], "");
    let g = sim.current().unwrap();
    sim.call(json!(1), "slow");
    sim.event(server_line(
        g,
        &url_error(1, "https://auth.example.com/login"),
    ));
    let a = sim.answer(&json!(1));
    assert_eq!(
        (a["error"]["code"].as_i64(), &a["error"]["data"]["rule"]),
        (Some(REFUSED), &json!("elicitation.url")),
        "{a}"
    );
    // Allowed by the policy and declared by the host: only good URLs pass.
    let mut sim = Sim::with(&[], &[], "[elicitation]\nurl = true\n");
    sim.host_roots = paths(&sim, &["a"]);
    sim.host(json!({"jsonrpc":"2.0","id":"init","method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"roots":{"listChanged":true},"elicitation":{"form":{},"url":{}}},"clientInfo":{"name":"sim","version":"1"}}}));
    sim.serve_all();
    sim.host(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    sim.settle_all();
    let g = sim.current().unwrap();
    for (id, url, ok) in [
        (2, "https://auth.example.com/login", true),
        (3, "http://auth.example.com/login", false),
        (4, "https://127.0.0.1/login", false),
        (5, "javascript:alert(1)", false),
    ] {
        sim.call(json!(id), "slow");
        sim.event(server_line(g, &url_error(id, url)));
        let a = sim.answer(&json!(id));
        if ok {
            assert_eq!(a["error"]["code"], -32042, "{a}");
        } else {
            assert_eq!(a["error"]["code"], REFUSED, "{url}: {a}");
        }
    }
    // Its completion is relayed once; another id's never.
    let seen = sim.host_raw.len();
    for id in ["e2", "e2", "e3"] {
        sim.event(server_line(g, &json!({"jsonrpc":"2.0","method":"notifications/elicitation/complete","params":{"elicitationId":id}})));
    }
    assert_eq!(sim.host_raw.len(), seen + 1);
    read_by_hosts(&sim);
}

#[test]
fn a_task_result_for_an_unknown_task_is_refused_whatever_its_params() {
    let mut sim = running(&["a"], "");
    let g = sim.current().unwrap();
    let seen = sim.host_raw.len();
    let before = sim.servers[&g].got.len();
    for line in [
        &br#"{"jsonrpc":"2.0","id":1,"method":"tasks/result","params":{"taskId":"t-1"}}"#[..],
        br#"{"jsonrpc":"2.0","id":2,"method":"tasks/result","params":{"taskId":"t-1","_meta":{"x":"\udc00"}}}"#,
        br#"{"jsonrpc":"2.0","id":3,"method":"tasks/result","params":{"taskId":"t-1","_meta":{"x":1e400}}}"#,
        br#"{"jsonrpc":"2.0","id":4,"method":"tasks/result","params":{}}"#,
        br#"{"jsonrpc":"2.0","id":5,"method":"tasks/result"}"#,
        br#"{"jsonrpc":"2.0","id":6,"method":"tasks/get","params":{"taskId":"t-1"}}"#,
        br#"{"jsonrpc":"2.0","id":7,"method":"tasks/cancel","params":{"taskId":["t-1"]}}"#,
    ] {
        from_server(&mut sim, g, line);
    }
    assert_eq!(sim.host_raw[seen..], [] as [String; 0]);
    let got = got_since(&sim, g, before);
    assert_eq!(got.len(), 7, "{got:?}");
    assert!(got.iter().all(|v| v["error"].is_object()), "{got:?}");
    read_by_hosts(&sim);
}
