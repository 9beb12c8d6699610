//! A small scriptable MCP server over stdio, for rootfence's tests and
//! benches. It speaks the handshake-era protocol and offers tools that
//! exercise the proxy: reading files, sleeping, crashing, writing garbage,
//! asking the client for roots or sampling, sending oversized replies.
//!
//! Tools that ask the client something (`roots`, `sample*`, `elicit*`)
//! answer the tool call with what the server received: the result as JSON
//! text, or the error as JSON text with `isError: true`. The guard tools:
//! - `elicit_form`: a valid form (name: string, minLength 1, required;
//!   age: integer 0..150); `{"task": true}` makes it task-augmented, and the
//!   server then fetches the outcome with `tasks/result`;
//! - `elicit_password`: a form asking for a password;
//! - `elicit_nested`: a form with a nested object;
//! - `elicit_url`: URL mode, `{"url": ...}`;
//! - `sample_tokens`: sampling with `{"maxTokens": n}`;
//! - `sample_oversized`: sampling with a text of `{"bytes": n}` bytes;
//! - `sample_tools`: sampling with a tool and a toolChoice.
//!
//! Tools for races and faults: `instance` (a token unique to this process,
//! also when every server is pid 1 of its own namespace), `crash_later`
//! (`{"ms": n}`: answers at once, exits with code 3 after `n` ms),
//! `close_stdout` (closes its stdout and keeps running, reading stdin),
//! `connect` (`{"port": p}`: a TCP connection to 127.0.0.1:p),
//! `sample_progress` (sampling with `_meta.progressToken = "progress-1"`;
//! the answer reports the result and every `notifications/progress` the
//! server received while it waited).
//!
//! `env` answers the value of the variable `{"name": ...}`, or `(unset)`.
//!
//! `proxy_get` sends `{"request": ...}` (bytes as they are) to the HTTP
//! proxy of `HTTP_PROXY` and answers the first line of its response.
//!
//! `raw` writes each of `{"lines": [...]}` to stdout as it is (`$ID`
//! replaced by the tool call's id), then answers "written" unless
//! `{"answer": false}`: a hostile peer's lines.
//!
//! Environment: `FAKE_NEED_PATH` (exit with code 3 at once when this
//! path does not exist: a server that needs its directory), `FAKE_PROTOCOL`
//! (the protocol revision `initialize` answers; default the one asked),
//! `FAKE_CAPABILITIES` (the capabilities `initialize`
//! answers, JSON; default tools and logging), `FAKE_ANSWERS` (a JSON object: a request of a method it
//! names is answered with its value as the result, `$ID` in it replaced
//! by the request's id), `FAKE_TOOLS` (comma-separated extra tool names, to make
//! `tools/list` differ between launches), `FAKE_EXIT_ON_START` (exit at
//! once with this code), `FAKE_START_DELAY_MS` (sleep this long before
//! reading anything: a slow-starting server), `FAKE_NO_INIT` (never answer
//! `initialize`).

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
    if let Ok(p) = std::env::var("FAKE_NEED_PATH")
        && !std::path::Path::new(&p).exists()
    {
        eprintln!("fake server: {p} not found");
        std::process::exit(3);
    }
    if let Some(ms) = std::env::var("FAKE_START_DELAY_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        std::thread::sleep(std::time::Duration::from_millis(ms));
    }
    let no_init = std::env::var_os("FAKE_NO_INIT").is_some();
    let capabilities: Value = std::env::var("FAKE_CAPABILITIES")
        .ok()
        .and_then(|c| serde_json::from_str(&c).ok())
        .unwrap_or_else(|| json!({"tools": {"listChanged": true}, "logging": {}}));
    let answers: serde_json::Map<String, Value> = std::env::var("FAKE_ANSWERS")
        .ok()
        .and_then(|a| serde_json::from_str(&a).ok())
        .unwrap_or_default();
    let instance = format!(
        "{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos())
    );
    let out: Out = Arc::new(Mutex::new(std::io::stdout()));
    let events: Arc<Mutex<Vec<String>>> = Arc::new(Mutex::new(Vec::new()));
    // Requests this server sent to the client: (id, the client's tool call
    // id, whether a created task's result is to be fetched next).
    let waiting: Arc<Mutex<Vec<(i64, Value, bool)>>> = Arc::new(Mutex::new(Vec::new()));
    // Progress notifications received while a `sample_progress` waits.
    let mut progress: Vec<Value> = Vec::new();
    let mut progress_call: Option<i64> = None;
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
            if let Some(pos) = w.iter().position(|(mine, _, _)| id.as_i64() == Some(*mine)) {
                let (done, call_id, fetch_task) = w.remove(pos);
                if fetch_task && let Some(task_id) = msg.pointer("/result/task/taskId").cloned() {
                    let mine = next_id;
                    next_id += 1;
                    w.push((mine, call_id, false));
                    send(
                        &out,
                        &json!({"jsonrpc":"2.0","id":mine,"method":"tasks/result","params":{"taskId":task_id}}),
                    );
                    continue;
                }
                let mut payload = msg
                    .get("result")
                    .or(msg.get("error"))
                    .cloned()
                    .unwrap_or(Value::Null);
                if progress_call == Some(done) {
                    progress_call = None;
                    payload = json!({"answer": payload, "progress": std::mem::take(&mut progress)});
                }
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
            if method == "notifications/progress" && progress_call.is_some() {
                progress.push(msg.get("params").cloned().unwrap_or(Value::Null));
            }
            eventlog(&events, method.clone());
            continue;
        }
        let id = id.unwrap_or(Value::Null);
        let params = msg.get("params").cloned().unwrap_or(json!({}));
        if let Some(result) = answers.get(&method) {
            let text = result.to_string().replace("\"$ID\"", &id.to_string());
            send_raw(
                &out,
                &format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{text}}}"#),
            );
            continue;
        }
        match method.as_str() {
            "initialize" if no_init => eventlog(&events, "initialize ignored".into()),
            "initialize" => {
                let cap = |name: &str| {
                    params
                        .pointer(&format!("/capabilities/{name}"))
                        .map_or("-".to_string(), Value::to_string)
                };
                eventlog(
                    &events,
                    format!(
                        "initialize roots={} sampling={} elicitation={} tasks={}",
                        params.pointer("/capabilities/roots").is_some(),
                        cap("sampling"),
                        cap("elicitation"),
                        cap("tasks"),
                    ),
                );
                let v = std::env::var("FAKE_PROTOCOL")
                    .ok()
                    .map(Value::String)
                    .or_else(|| params.get("protocolVersion").cloned())
                    .unwrap_or(json!("2025-06-18"));
                send(
                    &out,
                    &json!({"jsonrpc":"2.0","id":id,"result":{
                    "protocolVersion": v,
                    "capabilities": capabilities.clone(),
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
                    "echo",
                    "read",
                    "write",
                    "sleep",
                    "crash",
                    "garbage",
                    "big",
                    "roots",
                    "sample",
                    "events",
                    "pid",
                    "env",
                    "elicit_form",
                    "elicit_password",
                    "elicit_nested",
                    "elicit_url",
                    "sample_tokens",
                    "sample_oversized",
                    "sample_tools",
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
                    "crash_later" => {
                        let ms = args["ms"].as_u64().unwrap_or(100);
                        std::thread::spawn(move || {
                            std::thread::sleep(std::time::Duration::from_millis(ms));
                            std::process::exit(3);
                        });
                        send(&out, &text_result(&id, "scheduled", false));
                    }
                    "close_stdout" => {
                        // Close the descriptor under the lock (no write
                        // in progress): the reader sees EOF while this
                        // process keeps reading its stdin.
                        let held = out.lock().unwrap_or_else(|e| e.into_inner());
                        // SAFETY: descriptor 1 is this process's stdout;
                        // every later write to it fails with EBADF, which
                        // std's stdout ignores.
                        unsafe { libc::close(1) };
                        drop(held);
                    }
                    "instance" => send(&out, &text_result(&id, &instance, false)),
                    "connect" => {
                        let port = args["port"].as_u64().unwrap_or(0) as u16;
                        match std::net::TcpStream::connect(("127.0.0.1", port)) {
                            Ok(_) => send(&out, &text_result(&id, "connected", false)),
                            Err(e) => send(&out, &text_result(&id, &format!("error: {e}"), true)),
                        }
                    }
                    "proxy_get" => {
                        let req = args["request"].as_str().unwrap_or_default();
                        send(&out, &text_result(&id, &proxy_get(req), false));
                    }
                    "raw" => {
                        for l in args["lines"].as_array().into_iter().flatten() {
                            let l = l.as_str().unwrap_or_default();
                            send_raw(&out, &l.replace("$ID", &id.to_string()));
                        }
                        if args["answer"] != json!(false) {
                            send(&out, &text_result(&id, "written", false));
                        }
                    }
                    "garbage" => {
                        send_raw(&out, "this is not json");
                        send(&out, &text_result(&id, "after garbage", false));
                    }
                    "big" => {
                        let n = args["bytes"].as_u64().unwrap_or(1024) as usize;
                        send(&out, &text_result(&id, &"x".repeat(n), false));
                    }
                    "roots" | "sample" | "sample_progress" | "elicit_form" | "elicit_password"
                    | "elicit_nested" | "elicit_url" | "sample_tokens" | "sample_oversized"
                    | "sample_tools" => {
                        let Some((method, req_params)) = ask(&name, &args) else {
                            continue;
                        };
                        let mine = next_id;
                        next_id += 1;
                        if name == "sample_progress" {
                            progress_call = Some(mine);
                            progress.clear();
                        }
                        let fetch_task =
                            req_params.as_ref().is_some_and(|p| p.get("task").is_some());
                        waiting.lock().unwrap_or_else(|e| e.into_inner()).push((
                            mine,
                            id.clone(),
                            fetch_task,
                        ));
                        let mut req = json!({"jsonrpc":"2.0","id":mine,"method":method});
                        if let Some(p) = req_params {
                            req["params"] = p;
                        }
                        send(&out, &req);
                    }
                    "events" => {
                        let ev = events.lock().unwrap_or_else(|e| e.into_inner()).join("\n");
                        send(&out, &text_result(&id, &ev, false));
                    }
                    "env" => {
                        let name = args["name"].as_str().unwrap_or("");
                        let v = std::env::var(name).unwrap_or_else(|_| "(unset)".into());
                        send(&out, &text_result(&id, &v, false));
                    }
                    "pid" => send(
                        &out,
                        &text_result(&id, &std::process::id().to_string(), false),
                    ),
                    "respond_later" => {
                        // Write a response to an id this server never
                        // received (a forgery), after a delay.
                        let forged =
                            json!({"jsonrpc":"2.0","id":args["id"],"result":args["result"]});
                        let ms = args["ms"].as_u64().unwrap_or(100);
                        let out2 = out.clone();
                        std::thread::spawn(move || {
                            std::thread::sleep(std::time::Duration::from_millis(ms));
                            send(&out2, &forged);
                        });
                        send(&out, &text_result(&id, "scheduled", false));
                    }
                    "flood" => {
                        // Many notifications, then the answer.
                        let count = args["count"].as_u64().unwrap_or(10);
                        let bytes = args["bytes"].as_u64().unwrap_or(1024) as usize;
                        let note = json!({"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"f".repeat(bytes)}});
                        for _ in 0..count {
                            send(&out, &note);
                        }
                        send(&out, &text_result(&id, "flooded", false));
                    }
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

/// The request a client-asking tool sends: method and params.
fn ask(name: &str, args: &Value) -> Option<(&'static str, Option<Value>)> {
    let text = |t: &str| json!([{"role":"user","content":{"type":"text","text":t}}]);
    Some(match name {
        "roots" => ("roots/list", None),
        "sample" => (
            "sampling/createMessage",
            Some(json!({"messages": text("hi"), "maxTokens": 10})),
        ),
        "sample_progress" => (
            "sampling/createMessage",
            Some(
                json!({"messages": text("hi"), "maxTokens": 10, "_meta": {"progressToken": "progress-1"}}),
            ),
        ),
        "sample_tokens" => (
            "sampling/createMessage",
            Some(
                json!({"messages": text("hi"), "maxTokens": args["maxTokens"].as_u64().unwrap_or(10)}),
            ),
        ),
        "sample_oversized" => {
            let n = args["bytes"].as_u64().unwrap_or(300_000) as usize;
            (
                "sampling/createMessage",
                Some(json!({"messages": text(&"x".repeat(n)), "maxTokens": 10})),
            )
        }
        "sample_tools" => (
            "sampling/createMessage",
            Some(
                json!({"messages": text("What is the weather in Paris?"), "maxTokens": 10,
                "tools": [{"name":"get_weather","description":"Weather by city",
                           "inputSchema":{"type":"object","properties":{"city":{"type":"string"}}}}],
                "toolChoice": {"mode":"auto"}}),
            ),
        ),
        "elicit_form" => {
            let mut p = json!({"message": "Who are you?", "requestedSchema": {"type":"object","properties":{
                "name": {"type":"string","title":"Name","minLength":1},
                "age": {"type":"integer","title":"Age","minimum":0,"maximum":150}},
                "required":["name"]}});
            if args["task"] == true {
                p["task"] = json!({"ttl": 60000});
            }
            ("elicitation/create", Some(p))
        }
        "elicit_password" => (
            "elicitation/create",
            Some(
                json!({"message": "Log in to continue", "requestedSchema": {"type":"object","properties":{
                "username": {"type":"string"},
                "password": {"type":"string","title":"Password"}},
                "required":["username","password"]}}),
            ),
        ),
        "elicit_nested" => (
            "elicitation/create",
            Some(
                json!({"message": "Where do you live?", "requestedSchema": {"type":"object","properties":{
                "address": {"type":"object","properties":{"street":{"type":"string"},"city":{"type":"string"}}}}}}),
            ),
        ),
        "elicit_url" => (
            "elicitation/create",
            Some(
                json!({"mode":"url","message":"Authorize the app","elicitationId":"el-1",
                "url": args["url"].as_str().unwrap_or("https://example.com/authorize")}),
            ),
        ),
        _ => return None,
    })
}

fn eventlog(events: &Arc<Mutex<Vec<String>>>, e: String) {
    events.lock().unwrap_or_else(|e| e.into_inner()).push(e);
}

/// Send `request` to the proxy `HTTP_PROXY` names; its status line, or
/// what failed.
fn proxy_get(request: &str) -> String {
    use std::io::Read;
    let Some(addr) = std::env::var("HTTP_PROXY").ok().and_then(|u| {
        u.strip_prefix("http://")
            .map(|a| a.trim_end_matches('/').to_string())
    }) else {
        return "no HTTP_PROXY".into();
    };
    let mut s = match std::net::TcpStream::connect(&addr) {
        Ok(s) => s,
        Err(e) => return format!("cannot connect to {addr}: {e}"),
    };
    if let Err(e) = s.write_all(request.as_bytes()) {
        return format!("cannot send: {e}");
    }
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    String::from_utf8_lossy(&answer)
        .lines()
        .next()
        .unwrap_or_default()
        .to_string()
}
