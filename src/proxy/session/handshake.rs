//! The recorded handshake and what is replayed to a rebuilt generation.
//!
//! rootfence keeps the host's `initialize` params, the server's answer, the
//! logging level and resource subscriptions the host asked for, and the
//! first page of each list the host saw. A rebuilt generation is brought up
//! with the same `initialize` (rootfence's own id), then, when it is
//! promoted, `notifications/initialized`, the level, the subscriptions, and
//! a fresh `tools/list`/`prompts/list`/`resources/list` whose answers are
//! compared with what the host saw (the host is told
//! `notifications/{tools,prompts,resources}/list_changed` when they
//! differ).

use std::collections::{BTreeSet, HashMap};

use serde_json::Value;

use super::ledger::Own;
use crate::policy::PolicyFile;
use crate::proxy::guard;
use crate::proxy::message;

/// What the host and the first server said in their handshake, and the
/// state the host set since.
#[derive(Debug, Default)]
pub struct Handshake {
    /// The host's `initialize` params, once received.
    pub host_init: Option<Value>,
    /// The host declared the roots capability.
    pub host_has_roots: bool,
    /// The host sent `notifications/initialized`.
    pub host_initialized: bool,
    /// The server's `initialize` result, once answered.
    pub server_init: Option<Value>,
    /// The negotiated protocol revision.
    pub protocol: Option<String>,
    /// The last `logging/setLevel` level.
    pub log_level: Option<String>,
    /// rootfence offered the host the `logging` capability the server does
    /// not have (to send it its own warnings).
    pub logging_offered: bool,
    /// Resources subscribed to.
    pub subscriptions: BTreeSet<String>,
    /// The first page of each list the host saw, as JSON text.
    lists: HashMap<&'static str, String>,
}

/// The list methods compared across rebuilds.
pub fn list_method(method: &str) -> Option<&'static str> {
    match method {
        "tools/list" => Some("tools/list"),
        "prompts/list" => Some("prompts/list"),
        "resources/list" => Some("resources/list"),
        _ => None,
    }
}

impl Handshake {
    /// Record the host's `initialize` params.
    pub fn record_host_init(&mut self, params: Value) {
        self.host_has_roots = params
            .pointer("/capabilities/roots")
            .is_some_and(Value::is_object);
        self.host_init = Some(params);
    }

    /// Record state a host request sets (`logging/setLevel`,
    /// `resources/subscribe`, `resources/unsubscribe`), from its params.
    pub fn record_host_request(&mut self, method: &str, params: Option<&str>) {
        let Some(v) = params.and_then(|p| serde_json::from_str::<Value>(p).ok()) else {
            return;
        };
        let text = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        match method {
            "logging/setLevel" => {
                if let Some(level) = text("level").filter(|l| LOG_LEVELS.contains(&l.as_str())) {
                    self.log_level = Some(level);
                }
            }
            "resources/subscribe" => {
                if let Some(uri) = text("uri") {
                    self.subscriptions.insert(uri);
                }
            }
            "resources/unsubscribe" => {
                if let Some(uri) = text("uri") {
                    self.subscriptions.remove(&uri);
                }
            }
            _ => {}
        }
    }

    /// Record the server's `initialize` result (the first one only).
    pub fn record_server_init(&mut self, result: &str) {
        if self.server_init.is_some() {
            return;
        }
        if let Ok(v) = serde_json::from_str::<Value>(result) {
            self.protocol = v
                .get("protocolVersion")
                .and_then(Value::as_str)
                .map(str::to_string);
            self.server_init = Some(v);
        }
    }

    /// Record a list the host saw (first pages only).
    pub fn record_list(&mut self, method: &'static str, paged: bool, result: &str) {
        if !paged {
            self.lists.insert(method, result.to_string());
        }
    }

    /// The `initialize` params a server is sent: the host's, with
    /// `capabilities.roots = {"listChanged": true}` (rootfence provides the
    /// server's roots whether or not the host has any) and without the
    /// sampling/elicitation capabilities the policy denies.
    pub fn initialize_params(&self, policy: &PolicyFile) -> Value {
        let mut params = self
            .host_init
            .clone()
            .filter(Value::is_object)
            .unwrap_or_else(|| serde_json::json!({}));
        if let Some(obj) = params.as_object_mut() {
            let caps = obj
                .entry("capabilities")
                .or_insert_with(|| serde_json::json!({}));
            if !caps.is_object() {
                *caps = serde_json::json!({});
            }
            if let Some(c) = caps.as_object_mut() {
                c.insert("roots".into(), serde_json::json!({"listChanged": true}));
                guard::shape_capabilities(c, policy);
            }
        }
        params
    }

    /// What a server launched now is offered (the capabilities of its
    /// `initialize`), once the host's `initialize` is known. A serving
    /// generation offered something else must be replaced.
    pub fn offer(&self, policy: &PolicyFile) -> Option<Value> {
        self.host_init.as_ref()?;
        self.initialize_params(policy).get("capabilities").cloned()
    }

    /// The `initialize` request for a server, with id `id_raw`.
    pub fn initialize_line(&self, id_raw: &str, policy: &PolicyFile) -> Vec<u8> {
        let params = self.initialize_params(policy);
        message::request(id_raw, "initialize", Some(&params.to_string()))
    }

    /// The requests replayed to a generation being promoted, whose
    /// `initialize` answered `init_result`: the logging level, the
    /// subscriptions, and the lists the server offers.
    pub fn replay(&self, init_result: Option<&Value>) -> Vec<(&'static str, Value, Own)> {
        let mut out = Vec::new();
        if let Some(level) = &self.log_level
            && self.server_logs()
        {
            out.push((
                "logging/setLevel",
                serde_json::json!({ "level": level }),
                Own::Replay,
            ));
        }
        for uri in &self.subscriptions {
            out.push((
                "resources/subscribe",
                serde_json::json!({ "uri": uri }),
                Own::Replay,
            ));
        }
        let caps = init_result.and_then(|v| v.get("capabilities"));
        for (cap, method) in [
            ("tools", "tools/list"),
            ("prompts", "prompts/list"),
            ("resources", "resources/list"),
        ] {
            if caps.is_some_and(|c| c.get(cap).is_some()) {
                out.push((method, serde_json::json!({}), Own::List(method)));
            }
        }
        out
    }

    /// A rebuilt generation answered `method` with `new`: the notification
    /// to send the host when it differs from what the host saw.
    pub fn compare_list(&mut self, method: &'static str, new: String) -> Option<Vec<u8>> {
        let old = self.lists.insert(method, new.clone())?;
        if same_json(&new, &old) {
            return None;
        }
        let note = match method {
            "tools/list" => "notifications/tools/list_changed",
            "prompts/list" => "notifications/prompts/list_changed",
            _ => "notifications/resources/list_changed",
        };
        tracing::info!("the relaunched server's {method} differs: telling the host");
        Some(message::notification(note, None))
    }

    /// Whether the server declared the `logging` capability.
    pub fn server_logs(&self) -> bool {
        self.server_init
            .as_ref()
            .is_some_and(|v| v.pointer("/capabilities/logging").is_some())
    }

    /// The `initialize` result `result` as the host is given it: with the
    /// `logging` capability when the server has none (rootfence's warnings
    /// go to the host as log messages). None when it needs no change.
    pub fn offer_logging(&mut self, result: &str) -> Option<String> {
        let mut v: Value = serde_json::from_str(result).ok()?;
        let caps = v.get_mut("capabilities")?.as_object_mut()?;
        if caps.contains_key("logging") {
            return None;
        }
        caps.insert("logging".into(), serde_json::json!({}));
        self.logging_offered = true;
        Some(v.to_string())
    }

    /// A `notifications/message` for the host at `level`, when the host was
    /// offered logging (by the server or by rootfence) and its level lets
    /// it through.
    pub fn log_to_host(&self, level: &str, text: &str) -> Option<Vec<u8>> {
        if !(self.server_logs() || self.logging_offered) {
            return None;
        }
        let rank = |l: &str| LOG_LEVELS.iter().position(|x| *x == l).unwrap_or(0);
        if self
            .log_level
            .as_deref()
            .is_some_and(|min| rank(level) < rank(min))
        {
            return None;
        }
        let params = serde_json::json!({"level": level, "logger": NOTE_LOGGER, "data": text});
        Some(message::notification(
            "notifications/message",
            Some(&params.to_string()),
        ))
    }
}

/// The logging levels of MCP (RFC 5424's severities), least severe first.
pub(super) const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// Whether `params` of a `logging/setLevel` name one of [`LOG_LEVELS`].
pub(super) fn valid_level(params: Option<&str>) -> bool {
    params
        .and_then(|p| serde_json::from_str::<Value>(p).ok())
        .and_then(|v| v.get("level").and_then(Value::as_str).map(str::to_string))
        .is_some_and(|l| LOG_LEVELS.contains(&l.as_str()))
}

/// The name rootfence's own notes carry as their `logger`.
pub const NOTE_LOGGER: &str = "rootfence";

/// Whether a server's `logger` could be taken for rootfence's: any name
/// that, lower-cased with everything but letters and digits left out,
/// holds "rootfence" (`rootfence`, `RootFence`, `[rootfence]`,
/// `root-fence.sandbox`).
pub fn reserved_logger(name: &str) -> bool {
    let folded: String = name
        .chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect();
    folded.contains("rootfence")
}

fn same_json(a: &str, b: &str) -> bool {
    match (
        serde_json::from_str::<Value>(a),
        serde_json::from_str::<Value>(b),
    ) {
        (Ok(x), Ok(y)) => x == y,
        _ => a == b,
    }
}
