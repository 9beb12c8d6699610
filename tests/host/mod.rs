//! Shared helpers for the proxy tests: a scripted host over in-memory
//! pipes, and paths to the test peers.

#![allow(dead_code)]

pub mod session;

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines, WriteHalf};

/// The scriptable MCP server built from `examples/mcp_fake_server.rs`.
pub fn fake_server() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let dir = exe.parent().unwrap().parent().unwrap();
    let p = dir.join("examples").join("mcp_fake_server");
    assert!(
        p.exists(),
        "{} missing: run `cargo build --examples`",
        p.display()
    );
    p
}

/// A scripted host: writes lines to rootfence's stdin, reads its stdout.
pub struct Host {
    pub w: WriteHalf<DuplexStream>,
    pub lines: Lines<BufReader<tokio::io::ReadHalf<DuplexStream>>>,
    /// Messages read while waiting for something else.
    pub seen: Vec<Value>,
}

impl Host {
    pub fn new(stream: DuplexStream) -> Host {
        let (r, w) = tokio::io::split(stream);
        Host {
            w,
            lines: BufReader::new(r).lines(),
            seen: Vec::new(),
        }
    }

    pub async fn send(&mut self, v: Value) {
        self.send_raw(&v.to_string()).await;
    }

    pub async fn send_raw(&mut self, s: &str) {
        self.w.write_all(s.as_bytes()).await.unwrap();
        self.w.write_all(b"\n").await.unwrap();
        self.w.flush().await.unwrap();
    }

    /// The next message rootfence writes, parsed.
    pub async fn recv(&mut self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(20), self.lines.next_line())
            .await
            .expect("timed out waiting for rootfence")
            .unwrap()
            .expect("rootfence closed stdout");
        serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("not JSON from rootfence: {e}: {line}"))
    }

    /// The next message rootfence writes, as raw text.
    pub async fn recv_raw(&mut self) -> String {
        tokio::time::timeout(Duration::from_secs(20), self.lines.next_line())
            .await
            .expect("timed out waiting for rootfence")
            .unwrap()
            .expect("rootfence closed stdout")
    }

    /// Wait for the response to `id`, answering `roots/list` requests with
    /// `roots` and keeping everything else in `seen`.
    pub async fn response(&mut self, id: Value, roots: &Value) -> Value {
        if let Some(pos) = self
            .seen
            .iter()
            .position(|m| m.get("id") == Some(&id) && m.get("method").is_none())
        {
            return self.seen.remove(pos);
        }
        loop {
            let m = self.recv().await;
            if m.get("method").and_then(Value::as_str) == Some("roots/list") {
                let rid = m["id"].clone();
                self.send(json!({"jsonrpc":"2.0","id":rid,"result":{"roots":roots}}))
                    .await;
                continue;
            }
            if m.get("id") == Some(&id) && m.get("method").is_none() {
                return m;
            }
            self.seen.push(m);
        }
    }

    /// Send a `tools/call` of `tool` with `args` under `id`, without
    /// waiting for its answer.
    pub async fn send_call(&mut self, id: impl Into<Value>, tool: &str, args: Value) {
        let id = id.into();
        self.send(json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":args}}))
            .await;
    }

    /// Tell rootfence the host's roots changed.
    pub async fn roots_changed(&mut self) {
        self.send(json!({"jsonrpc":"2.0","method":"notifications/roots/list_changed"}))
            .await;
    }

    /// The message of an error response, or a panic showing `v`.
    pub fn error_message(v: &Value) -> &str {
        v["error"]["message"]
            .as_str()
            .unwrap_or_else(|| panic!("not an error: {v}"))
    }

    pub async fn request(&mut self, id: i64, method: &str, params: Value, roots: &Value) -> Value {
        self.send(json!({"jsonrpc":"2.0","id":id,"method":method,"params":params}))
            .await;
        self.response(json!(id), roots).await
    }

    pub async fn call(&mut self, id: i64, tool: &str, args: Value, roots: &Value) -> Value {
        self.request(
            id,
            "tools/call",
            json!({"name":tool,"arguments":args}),
            roots,
        )
        .await
    }

    /// Text of a tools/call result.
    pub fn text(v: &Value) -> String {
        v["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .to_string()
    }

    pub async fn initialize(&mut self, version: &str, with_roots: bool, roots: &Value) -> Value {
        let caps = if with_roots {
            json!({"roots":{"listChanged":true}})
        } else {
            json!({})
        };
        let r = self
            .request(
                0,
                "initialize",
                json!({"protocolVersion":version,"capabilities":caps,"clientInfo":{"name":"test-host","version":"1"}}),
                roots,
            )
            .await;
        self.send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}))
            .await;
        r
    }
}
