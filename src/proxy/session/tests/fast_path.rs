//! The relay's fast path: a line the strict scan reads is relayed byte for
//! byte, and its members are read only where a rule needs them (a host
//! request's params are not read again for a `tools/call`). Lines crafted
//! to ride it (an escaped method name, a key written twice, a question
//! behind an escape) are read strictly and still reach the guard.

use serde_json::{Value, json};

use super::Sim;
use crate::proxy::message::code;
use crate::proxy::session::{Event, Frame, GenId, ServerEvent};

/// A handshake-era session with the command-line root `a`, settled.
fn session() -> Sim {
    let mut sim = Sim::with(&["a"], &[], "");
    sim.handshake("2025-11-25", false);
    sim.settle_all();
    sim
}

fn from_server(sim: &mut Sim, g: GenId, bytes: &[u8]) {
    sim.event(Event::Server(ServerEvent::Frame(
        g,
        Frame::Line(bytes.to_vec()),
    )));
}

/// The raw lines `g` received since `from`.
fn raw_to(sim: &Sim, g: GenId, from: usize) -> Vec<Vec<u8>> {
    sim.server_raw[from..]
        .iter()
        .filter(|(to, _)| *to == g)
        .map(|(_, l)| l.clone())
        .collect()
}

/// The host's `tools/call` `id` of the tool `slow` (held by the simulated
/// server, so the test answers it); the id the server saw.
fn held_call(sim: &mut Sim, g: GenId, id: i64) -> Value {
    let from = sim.servers[&g].got.len();
    sim.call(json!(id), "slow");
    let got = sim.servers[&g].got[from..].to_vec();
    assert_eq!(got.len(), 1, "{got:?}");
    got[0]["id"].clone()
}

#[test]
fn a_plain_call_and_its_answer_pass_byte_for_byte() {
    let mut sim = session();
    let g = sim.current().expect("a server");
    // Whitespace, a key named `cursor` and `resultType` deep in the
    // arguments, a long string: all valid, read the same by every parser,
    // so the line goes on as it came.
    let data = "QUJD".repeat(300);
    let line = format!(
        r#"{{ "jsonrpc" : "2.0", "id": 41,	"method":"tools/call", "params":{{"name":"slow","arguments":{{"cursor":"c","x":{{"resultType":"input_required"}},"data":"{data}"}}}} }}"#
    );
    let from = sim.server_raw.len();
    sim.host_raw(&line);
    assert_eq!(raw_to(&sim, g, from), [line.as_bytes().to_vec()]);
    // The answer, as the server wrote it (a `resultType` that is not the
    // result's own is no question).
    let answer = format!(
        r#"{{"jsonrpc":"2.0", "result":{{"content":[{{"type":"text","text":"{data}"}}],"structuredContent":{{"resultType":"input_required","inputRequests":{{}}}}}},"id":41 }}"#
    );
    let seen = sim.host_raw.len();
    from_server(&mut sim, g, answer.as_bytes());
    assert_eq!(sim.host_raw[seen..], [answer]);
}

#[test]
fn a_server_request_with_an_escaped_or_repeated_method_reaches_the_guard() {
    let mut sim = session();
    let g = sim.current().expect("a server");
    let seen = sim.host_raw.len();
    let from = sim.servers[&g].got.len();
    // `sampl\u0069ng/createMessage` is `sampling/createMessage`: the scan
    // leaves it to the strict reading, and the guard refuses it (the
    // default policy allows no sampling).
    from_server(
        &mut sim,
        g,
        br#"{"jsonrpc":"2.0","id":70,"method":"sampl\u0069ng/createMessage","params":{"messages":[],"maxTokens":10}}"#,
    );
    // `method` twice: first-wins and last-wins parsers disagree; refused.
    from_server(
        &mut sim,
        g,
        br#"{"jsonrpc":"2.0","id":71,"method":"ping","method":"sampling/createMessage","params":{"messages":[],"maxTokens":10}}"#,
    );
    // A key repeated deeper, in the params.
    from_server(
        &mut sim,
        g,
        br#"{"jsonrpc":"2.0","id":72,"method":"elicitation/create","params":{"message":"m","requestedSchema":{"type":"object","properties":{}},"message":"x"}}"#,
    );
    assert_eq!(sim.host_raw[seen..], [] as [String; 0]);
    let got = sim.servers[&g].got[from..].to_vec();
    let by_id = |id: i64| {
        got.iter()
            .find(|v| v["id"] == json!(id))
            .unwrap_or_else(|| panic!("no answer to {id}: {got:?}"))
            .clone()
    };
    let a = by_id(70);
    assert_eq!(a["error"]["code"], code::POLICY_REFUSED, "{a}");
    assert_eq!(a["error"]["data"]["rule"], "sampling.allow", "{a}");
    for id in [71, 72] {
        let a = by_id(id);
        assert_eq!(a["error"]["code"], code::INVALID_REQUEST, "{a}");
    }
}

#[test]
fn a_question_behind_an_escape_or_a_repeated_key_in_a_result_reaches_the_guard() {
    let sampling =
        r#"{"llm":{"method":"sampling/createMessage","params":{"messages":[],"maxTokens":10}}}"#;
    let escaped = r#"{"llm":{"method":"sampl\u0069ng/createMessage","params":{"messages":[],"maxTokens":10}}}"#;
    // Each with how it must end: not relayed as a result; unreadable
    // (the host's request gets rootfence's error), or judged and refused.
    let unreadable = code::INTERNAL_ERROR;
    let refused = code::POLICY_REFUSED;
    let answers = [
        // An escaped key, `resultType` twice once unescaped.
        (
            format!(
                r#"{{"resultType":"complete","result\u0054ype":"input_required","inputRequests":{sampling}}}"#
            ),
            unreadable,
        ),
        // A repeated key: read one way by some parsers, the other way by
        // others.
        (
            format!(
                r#"{{"resultType":"complete","resultType":"input_required","inputRequests":{sampling}}}"#
            ),
            unreadable,
        ),
        // An escaped key that is not repeated: read strictly, judged.
        (
            format!(r#"{{"result\u0054ype":"input_required","inputRequests":{sampling}}}"#),
            refused,
        ),
        // The question's own method escaped.
        (
            format!(r#"{{"resultType":"input_required","inputRequests":{escaped}}}"#),
            refused,
        ),
        // Questions without `resultType`.
        (format!(r#"{{"inputRequests":{sampling}}}"#), refused),
    ];
    for (n, (result, want)) in answers.iter().enumerate() {
        let mut sim = session();
        let g = sim.current().expect("a server");
        let id = 50 + i64::try_from(n).expect("small");
        let wire = held_call(&mut sim, g, id);
        let seen = sim.host_raw.len();
        let line = format!(r#"{{"jsonrpc":"2.0","id":{wire},"result":{result}}}"#);
        from_server(&mut sim, g, line.as_bytes());
        let a = sim.answer(&json!(id));
        assert!(a.get("result").is_none(), "{result}: relayed as {a}");
        assert_eq!(a["error"]["code"], *want, "{result}: {a}");
        if *want == refused {
            assert_eq!(
                a["error"]["data"]["rule"], "sampling.allow",
                "{result}: {a}"
            );
        }
        assert!(
            sim.host_raw[seen..]
                .iter()
                .all(|l| !l.contains("createMessage") && !l.contains("inputRequests")),
            "{result}: {:?}",
            &sim.host_raw[seen..]
        );
    }
}
