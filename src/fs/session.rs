//! The MCP session on stdio: one JSON-RPC message a line in, one a line
//! out; the handshake era (`initialize`, `roots/list` asked of the host)
//! and the 2026-07-28 revision (`server/discover`, each request carrying
//! its protocol version and client capabilities in `_meta`).
//!
//! Calls are served one at a time, in order, on this thread; a reader
//! thread only splits stdin into lines.

use std::collections::VecDeque;
use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::mpsc;
use std::time::Instant;

use serde_json::{Map, Value, json};

use super::roots_client::{ROOTS_KEY, RootsClient};
use super::tools::{self, Context};
use super::walk::Limits;

/// The handshake-era revisions this server speaks, oldest first.
const HANDSHAKE_VERSIONS: &[&str] = &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
/// The stateless revision.
const STATELESS: &str = "2026-07-28";
const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// What `rootfence fs` serves.
#[derive(Debug, Clone, Default)]
pub struct Config {
    /// Roots from the command line: `(path, read_only)`.
    pub roots: Vec<(String, bool)>,
    /// Limits of `directory_tree` and `search_files`.
    pub limits: Limits,
    /// The home directory (`~` in paths and roots).
    pub home: Option<PathBuf>,
}

fn server_info() -> Value {
    json!({"name": "rootfence-fs", "version": env!("CARGO_PKG_VERSION")})
}

struct Session<W: Write> {
    out: W,
    roots: RootsClient,
    limits: Limits,
    home: Option<PathBuf>,
    /// `tools/call` requests waiting for the host's roots.
    held: VecDeque<Value>,
}

/// Serve MCP on `input`/`output` until `input` ends.
pub fn serve<R, W>(config: Config, input: R, output: W) -> std::io::Result<()>
where
    R: BufRead + Send + 'static,
    W: Write,
{
    let (roots, errors) = RootsClient::new(config.roots, config.home.clone());
    for e in errors {
        tracing::warn!("{e}");
    }
    if roots.current.is_empty() {
        tracing::warn!("no root from the command line: waiting for the host's roots");
    }
    let mut s = Session {
        out: output,
        roots,
        limits: config.limits,
        home: config.home,
        held: VecDeque::new(),
    };
    let (tx, rx) = mpsc::sync_channel::<Vec<u8>>(64);
    std::thread::Builder::new()
        .name("rootfence-fs-stdin".into())
        .spawn(move || {
            let mut input = input;
            loop {
                let mut line = Vec::new();
                match input.read_until(b'\n', &mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        if tx.send(line).is_err() {
                            break;
                        }
                    }
                }
            }
        })?;
    loop {
        let line = match s.roots.waiting_until() {
            Some(deadline) => {
                match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                    Ok(l) => l,
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        s.roots.give_up();
                        s.release_held(Some("the host did not answer roots/list in time"))?;
                        continue;
                    }
                    Err(mpsc::RecvTimeoutError::Disconnected) => break,
                }
            }
            None => match rx.recv() {
                Ok(l) => l,
                Err(_) => break,
            },
        };
        s.on_line(&line)?;
    }
    Ok(())
}

impl<W: Write> Session<W> {
    fn send(&mut self, v: &Value) -> std::io::Result<()> {
        let mut text = v.to_string();
        text.push('\n');
        self.out.write_all(text.as_bytes())?;
        self.out.flush()
    }

    fn reply(&mut self, id: &Value, result: Value) -> std::io::Result<()> {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "result": result}))
    }

    fn error(&mut self, id: &Value, code: i64, message: &str) -> std::io::Result<()> {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}))
    }

    fn on_line(&mut self, line: &[u8]) -> std::io::Result<()> {
        let text = String::from_utf8_lossy(line);
        let text = text.trim();
        if text.is_empty() {
            return Ok(());
        }
        let msg: Value = match serde_json::from_str(text) {
            Ok(v) => v,
            Err(e) => return self.error(&Value::Null, -32700, &format!("Parse error: {e}")),
        };
        let Some(obj) = msg.as_object() else {
            return self.error(
                &Value::Null,
                -32600,
                "Invalid Request: one JSON-RPC object per line (batches are not supported)",
            );
        };
        let id = obj.get("id").cloned();
        match (obj.get("method").and_then(Value::as_str), id) {
            (Some(method), Some(id)) => {
                let params = obj.get("params").cloned().unwrap_or(Value::Null);
                self.on_request(method, id, params, msg.clone())
            }
            (Some(method), None) => self.on_notification(method),
            (None, Some(id)) => {
                if self.roots.on_response(&id, obj.get("result")) {
                    self.release_held(None)?;
                }
                Ok(())
            }
            (None, None) => self.error(&Value::Null, -32600, "Invalid Request"),
        }
    }

    fn on_notification(&mut self, method: &str) -> std::io::Result<()> {
        match method {
            "notifications/initialized" if self.roots.host_declared => {
                let ask = self.roots.ask(Instant::now());
                self.send(&ask)
            }
            "notifications/roots/list_changed" if self.roots.host_declared => {
                let ask = self.roots.ask(Instant::now());
                self.send(&ask)
            }
            _ => Ok(()),
        }
    }

    fn on_request(
        &mut self,
        method: &str,
        id: Value,
        params: Value,
        whole: Value,
    ) -> std::io::Result<()> {
        let stateless = params
            .pointer(&format!("/_meta/{}", META_VERSION.replace('/', "~1")))
            .and_then(Value::as_str)
            .is_some_and(|v| v == STATELESS);
        match method {
            "initialize" => {
                self.roots.host_declared = params.pointer("/capabilities/roots").is_some();
                let asked = params
                    .get("protocolVersion")
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let version = if HANDSHAKE_VERSIONS.contains(&asked) {
                    asked
                } else {
                    HANDSHAKE_VERSIONS[HANDSHAKE_VERSIONS.len() - 1]
                };
                self.reply(
                    &id,
                    json!({
                        "protocolVersion": version,
                        "capabilities": {"tools": {"listChanged": true}},
                        "serverInfo": server_info(),
                    }),
                )
            }
            "server/discover" => self.reply(
                &id,
                json!({
                    "supportedVersions": [STATELESS],
                    "capabilities": {"tools": {"listChanged": true}},
                    "resultType": "complete",
                    "ttlMs": 0,
                    "cacheScope": "private",
                    "_meta": {META_SERVER_INFO: server_info()},
                }),
            ),
            "ping" => self.reply(&id, json!({})),
            "tools/list" => {
                let mut result = json!({"tools": tools::tools()});
                if stateless {
                    complete(&mut result);
                    // A cacheable result in 2026-07-28: not to be cached
                    // (the tools do not change, but nothing is promised).
                    result["ttlMs"] = json!(0);
                    result["cacheScope"] = json!("private");
                }
                self.reply(&id, result)
            }
            "tools/call" if stateless => self.call_stateless(id, &params),
            "tools/call" => {
                if self.roots.waiting_until().is_some() {
                    self.held.push_back(whole);
                    return Ok(());
                }
                self.call(&id, &params, None)
            }
            _ => self.error(&id, -32601, "Method not found"),
        }
    }

    /// Serve a call with the current roots, or with `roots` when given.
    fn call(
        &mut self,
        id: &Value,
        params: &Value,
        roots: Option<&super::paths::Roots>,
    ) -> std::io::Result<()> {
        let name = params.get("name").and_then(Value::as_str).unwrap_or("");
        let arguments = params.get("arguments").cloned().unwrap_or(Value::Null);
        let cx = Context {
            roots: roots.unwrap_or(&self.roots.current),
            home: self.home.as_deref(),
            limits: self.limits,
        };
        let mut result = tools::call(&cx, name, &arguments);
        if roots.is_some() {
            complete(&mut result);
        }
        self.reply(id, result)
    }

    /// A 2026-07-28 call: when the host declares roots, served with the
    /// roots its retry carries, asked for with an `input_required` result
    /// first.
    fn call_stateless(&mut self, id: Value, params: &Value) -> std::io::Result<()> {
        let caps = params.get("_meta").and_then(|m| m.get(META_CAPABILITIES));
        let declares_roots = caps.and_then(|c| c.get("roots")).is_some();
        if !declares_roots {
            let roots = self.roots.cli_roots();
            return self.call(&id, params, Some(&roots));
        }
        let given = params
            .get("inputResponses")
            .and_then(|r| r.get(ROOTS_KEY))
            .and_then(|r| r.get("roots"));
        match given {
            Some(list) => {
                let (roots, _) = self.roots.roots_in(list);
                self.call(&id, params, Some(&roots))
            }
            None => {
                let mut requests = Map::new();
                requests.insert(
                    ROOTS_KEY.into(),
                    json!({"method": "roots/list", "params": {}}),
                );
                self.reply(
                    &id,
                    json!({"resultType": "input_required", "inputRequests": requests}),
                )
            }
        }
    }

    /// Serve (or, with `why`, refuse) the calls that waited for roots.
    fn release_held(&mut self, why: Option<&str>) -> std::io::Result<()> {
        while self.roots.waiting_until().is_none() {
            let Some(msg) = self.held.pop_front() else {
                break;
            };
            let id = msg.get("id").cloned().unwrap_or(Value::Null);
            let params = msg.get("params").cloned().unwrap_or(Value::Null);
            match why {
                Some(why) => {
                    let text = format!(
                        "{why}: the allowed directories are unknown, so the call is refused"
                    );
                    self.reply(
                        &id,
                        json!({"content": [{"type": "text", "text": text}], "isError": true}),
                    )?;
                }
                None => self.call(&id, &params, None)?,
            }
        }
        Ok(())
    }
}

/// Mark a 2026-07-28 result complete.
fn complete(result: &mut Value) {
    if let Some(o) = result.as_object_mut() {
        o.insert("resultType".into(), json!("complete"));
    }
}
