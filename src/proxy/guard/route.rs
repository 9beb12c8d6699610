//! Which server messages the guard must see: it judges methods, not
//! message kinds. A server → host request method sent as a notification
//! (no `id`), alone or as a member of a 2025-03-26 batch, is still that
//! method: it never reaches the host unjudged.

use crate::proxy::message::Kind;

/// The server → host request methods: what a server may ask of the host
/// (2024-11-05 to 2025-11-25; in 2026-07-28 only inside `input_required`
/// results, see [`super::stateless`]).
pub const SERVER_REQUEST_METHODS: &[&str] = &[
    "roots/list",
    "sampling/createMessage",
    "elicitation/create",
    "tasks/result",
    "tasks/get",
    "tasks/cancel",
];

/// What the session does with one message from the server (a batch member
/// counts as one message).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerRoute {
    /// Relay to the host (responses, notifications, unguarded requests).
    Relay,
    /// A `roots/list` request: rootfence answers with the enforced roots.
    AnswerRoots,
    /// A guarded request: ask [`super::Guard::on_request`].
    Judge,
    /// A server → host request method without an id: it cannot be judged
    /// and answered, so it is dropped (and audited with
    /// [`super::Guard::on_dropped_notification`]).
    Drop,
}

/// Route a server message of `kind` with `method`.
///
/// # Security
///
/// Every message whose method is a server → host request method is
/// answered by rootfence, judged, or dropped, whatever its shape; none
/// reaches the host as it was sent.
pub fn server_message(kind: Kind, method: Option<&str>) -> ServerRoute {
    let Some(method) = method else {
        return ServerRoute::Relay;
    };
    let asks = SERVER_REQUEST_METHODS.contains(&method);
    match kind {
        Kind::Request if method == "roots/list" => ServerRoute::AnswerRoots,
        Kind::Request if super::GUARDED.contains(&method) => ServerRoute::Judge,
        Kind::Notification if asks => ServerRoute::Drop,
        _ => ServerRoute::Relay,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::message;

    fn route(line: &str) -> ServerRoute {
        let env = message::parse(line.as_bytes()).unwrap();
        server_message(env.kind, env.method.as_deref())
    }

    #[test]
    fn guarded_methods_are_judged_whatever_the_shape() {
        for method in ["sampling/createMessage", "elicitation/create"] {
            let req = format!(r#"{{"jsonrpc":"2.0","id":1,"method":"{method}","params":{{}}}}"#);
            assert_eq!(route(&req), ServerRoute::Judge, "{method}");
            // The same method without an id: dropped, never relayed.
            let note = format!(r#"{{"jsonrpc":"2.0","method":"{method}","params":{{}}}}"#);
            assert_eq!(route(&note), ServerRoute::Drop, "{method}");
        }
        assert_eq!(
            route(r#"{"jsonrpc":"2.0","id":"r","method":"roots/list"}"#),
            ServerRoute::AnswerRoots
        );
        assert_eq!(
            route(r#"{"jsonrpc":"2.0","method":"roots/list"}"#),
            ServerRoute::Drop
        );
        assert_eq!(
            route(r#"{"jsonrpc":"2.0","method":"tasks/result","params":{"taskId":"t"}}"#),
            ServerRoute::Drop
        );
    }

    #[test]
    fn batch_members_are_routed_one_by_one() {
        // A 2025-03-26 batch from the server: each member is a message.
        let batch = r#"[{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"x"}},
            {"jsonrpc":"2.0","method":"sampling/createMessage","params":{"messages":[],"maxTokens":9}},
            {"jsonrpc":"2.0","id":4,"method":"elicitation/create","params":{}},
            {"jsonrpc":"2.0","id":5,"result":{}}]"#;
        let items: Vec<&serde_json::value::RawValue> = serde_json::from_str(batch).unwrap();
        let routes: Vec<ServerRoute> = items.iter().map(|i| route(i.get())).collect();
        assert_eq!(
            routes,
            [
                ServerRoute::Relay,
                ServerRoute::Drop,
                ServerRoute::Judge,
                ServerRoute::Relay
            ]
        );
    }

    #[test]
    fn everything_else_is_relayed() {
        for line in [
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/elicitation/complete","params":{"elicitationId":"e"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#,
            r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#,
        ] {
            assert_eq!(route(line), ServerRoute::Relay, "{line}");
        }
        // tasks/result as a request is judged (its answer may be checked).
        assert_eq!(
            route(r#"{"jsonrpc":"2.0","id":1,"method":"tasks/result","params":{"taskId":"t"}}"#),
            ServerRoute::Judge
        );
    }
}
