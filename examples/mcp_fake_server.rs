//! A small scriptable MCP server over stdio, for rootfence's tests and
//! benches. It speaks the handshake-era protocol and offers tools that
//! exercise the proxy: reading files, sleeping, crashing, writing garbage,
//! asking the client for roots or sampling, sending oversized replies.
//!
//! Environment: `FAKE_TOOLS` (comma-separated extra tool names, to make
//! `tools/list` differ between launches), `FAKE_EXIT_ON_START` (exit at
//! once with this code).

use std::io::{BufRead, Write};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

type Out = Arc<Mutex<std::io::Stdout>>;

fn send(out: &Out, v: &Value) {
    let mut s = v.to_string();
    s.push('\n');
    if let Ok(mut o) = out.lock() {
        let _ = o.write_all(s.as_bytes());
        let _ = o.flush();
    }
}

fn send_raw(out: &Out, s: &str) {
    if let Ok(mut o) = out.lock() {
        let _ = o.write_all(s.as_bytes());
        let _ = o.write_all(b"\n");
        let _ = o.flush();
    }
}

fn text_result(id: &Value, text: &str, is_error: bool) -> Value {
    json!({"jsonrpc":"2.0","id":id,"result":{"content":[{"type":"text","text":text}],"isError":is_error}})
}

fn main() {
    if let Ok(code) = std::env::var("FAKE_EXIT_ON_START") {
        std::process::exit(code.parse().unwrap_or(1));
    }
    let out: Out = Arc::new(Mutex::new(std::io::stdout()));
    let events: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(Vec::new()));
    // Requests this server sent to the client: id -> the client's tool call id.
    let waiting: Arc<Mutex<Vec<(i64, Value)>>> = Arc::new(Mutex::new(Vec::new()));
    let mut next_id: i64 = 1;
    eprintln!("fake server {} started", std::process::id());
    let stdin = std::io::stdin();
    for line in stdin.lock().lines() {
        let Ok(line) = line else { break };
        let Ok(msg) = serde_json::from_str::<Value>(&line) else {
            eprintln!("fake server: unreadable line");
            continue;
        };
        let method = msg
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        let id = msg.get("id").cloned();
        if let (None, Some(id)) = (msg.get("method"), &id) {
            // A response to one of our requests: complete the tool call.
            let mut w = waiting.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(pos) = w.iter().position(|(mine, _)| id.as_i64() == Some(*mine)) {
                let (_, call_id) = w.remove(pos);
                let payload = msg
                    .get("result")
                    .or(msg.get("error"))
                    .cloned()
                    .unwrap_or(Value::Null);
                send(
                    &out,
                    &text_result(&call_id, &payload.to_string(), msg.get("error").is_some()),
                );
            } else {
                eventlog(&events, format!("unexpected response {id}"));
            }
            continue;
        }
        if id.is_none() {
            eventlog(&events, method.clone());
            continue;
        }
        let id = id.unwrap_or(Value::Null);
        let params = msg.get("params").cloned().unwrap_or(json!({}));
        match method.as_str() {
            "initialize" => {
                eventlog(
                    &events,
                    format!(
                        "initialize roots={}",
                        params.pointer("/capabilities/roots").is_some()
                    ),
                );
                let v = params
                    .get("protocolVersion")
                    .cloned()
                    .unwrap_or(json!("2025-06-18"));
                send(
                    &out,
                    &json!({"jsonrpc":"2.0","id":id,"result":{
                    "protocolVersion": v,
                    "capabilities": {"tools": {"listChanged": true}, "logging": {}},
                    "serverInfo": {"name": "fake", "version": "1"}}}),
                );
            }
            "ping" => send(&out, &json!({"jsonrpc":"2.0","id":id,"result":{}})),
            "logging/setLevel" => {
                eventlog(&events, format!("setLevel {}", params["level"]));
                send(&out, &json!({"jsonrpc":"2.0","id":id,"result":{}}));
            }
            "tools/list" => {
                let mut tools = vec![];
                for name in [
                    "echo", "read", "write", "sleep", "crash", "garbage", "big", "roots", "sample",
                    "events", "pid",
                ] {
                    tools.push(json!({"name": name, "inputSchema": {"type":"object"}}));
                }
                if let Ok(extra) = std::env::var("FAKE_TOOLS") {
                    for name in extra.split(',').filter(|s| !s.is_empty()) {
                        tools.push(json!({"name": name, "inputSchema": {"type":"object"}}));
                    }
                }
                send(
                    &out,
                    &json!({"jsonrpc":"2.0","id":id,"result":{"tools": tools}}),
                );
            }
            "tools/call" => {
                let name = params["name"].as_str().unwrap_or("").to_string();
                let args = params.get("arguments").cloned().unwrap_or(json!({}));
                match name.as_str() {
                    "echo" => send(
                        &out,
                        &json!({"jsonrpc":"2.0","id":id,"result":{"content":[{"type":"text","text": args["text"]}]}}),
                    ),
                    "read" => {
                        let path = args["path"].as_str().unwrap_or("");
                        match std::fs::read_to_string(path) {
                            Ok(s) => send(&out, &text_result(&id, &s, false)),
                            Err(e) => send(&out, &text_result(&id, &format!("error: {e}"), true)),
                        }
                    }
                    "write" => {
                        let path = args["path"].as_str().unwrap_or("");
                        let text = args["text"].as_str().unwrap_or("");
                        match std::fs::write(path, text) {
                            Ok(()) => send(&out, &text_result(&id, "ok", false)),
                            Err(e) => send(&out, &text_result(&id, &format!("error: {e}"), true)),
                        }
                    }
                    "sleep" => {
                        let ms = args["ms"].as_u64().unwrap_or(100);
                        let out = out.clone();
                        std::thread::spawn(move || {
                            std::thread::sleep(std::time::Duration::from_millis(ms));
                            send(&out, &text_result(&id, "slept", false));
                        });
                    }
                    "crash" => std::process::exit(3),
                    "garbage" => {
                        send_raw(&out, "this is not json");
                        send(&out, &text_result(&id, "after garbage", false));
                    }
                    "big" => {
                        let n = args["bytes"].as_u64().unwrap_or(1024) as usize;
                        send(&out, &text_result(&id, &"x".repeat(n), false));
                    }
                    "roots" | "sample" => {
                        let mine = next_id;
                        next_id += 1;
                        waiting
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .push((mine, id.clone()));
                        let req = if name == "roots" {
                            json!({"jsonrpc":"2.0","id":mine,"method":"roots/list"})
                        } else {
                            json!({"jsonrpc":"2.0","id":mine,"method":"sampling/createMessage","params":{
                                "messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"maxTokens":10}})
                        };
                        send(&out, &req);
                    }
                    "events" => {
                        let ev = events.lock().unwrap_or_else(|e| e.into_inner()).join("\n");
                        send(&out, &text_result(&id, &ev, false));
                    }
                    "pid" => send(
                        &out,
                        &text_result(&id, &std::process::id().to_string(), false),
                    ),
                    _ => send(
                        &out,
                        &json!({"jsonrpc":"2.0","id":id,"error":{"code":-32602,"message":"unknown tool"}}),
                    ),
                }
            }
            _ => send(
                &out,
                &json!({"jsonrpc":"2.0","id":id,"error":{"code":-32601,"message":"Method not found"}}),
            ),
        }
    }
    eprintln!("fake server {} stdin closed", std::process::id());
}

fn eventlog(events: &Arc<Mutex<Vec<String>>>, e: String) {
    events.lock().unwrap_or_else(|e| e.into_inner()).push(e);
}
