//! A Rust host that launches a fenced MCP server and talks to it.
//!
//! ```text
//! cargo run --example embed -- <ROOT> -- <SERVER COMMAND>...
//! cargo run --example embed -- /tmp/project -- target/debug/rootfence fs
//! ```
//!
//! The server gets `ROOT` (read-write) and what its runtime needs, under
//! the built-in policy. The host initializes, lists the tools, and, when
//! the server has `read_text_file` (as filesystem servers do), reads a
//! file inside the root and one outside it: the first is served, the
//! second refused, whatever the server itself checks.

use std::ffi::OsString;
use std::path::PathBuf;

use rootfence::{Access, HostEnv, Policy, RootInput, SandboxLauncher, SessionConfig};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Error> {
    let (root, command) = arguments()?;
    let env = HostEnv::current();
    let policy = Policy::builtin(env.home.as_deref())?;

    // What the sandbox will be, before anything runs.
    let roots = vec![RootInput::command_line(
        root.display().to_string(),
        Access::ReadWrite,
    )];
    let plan = rootfence::plan_for_launch(&policy, &roots, &command, &env)?;
    for refused in &plan.refused {
        eprintln!("refused: {refused}");
    }
    eprintln!("{} paths granted", plan.grants.len());

    // The session: rootfence between these in-memory streams (the host's
    // side) and the sandboxed server.
    let (host, proxy_side) = tokio::io::duplex(1 << 16);
    let (proxy_in, proxy_out) = tokio::io::split(proxy_side);
    let (_events, events) = mpsc::unbounded_channel();
    let launcher = SandboxLauncher::new(env.home.clone());
    let config = SessionConfig::new(policy, roots, command, env);
    let session = tokio::spawn(rootfence::run_proxy(
        config, launcher, proxy_in, proxy_out, events,
    ));

    let mut host = Host::new(host);
    let init = host
        .request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
               "clientInfo": {"name": "embed-example", "version": "1"}}),
        )
        .await?;
    println!("server: {}", init["result"]["serverInfo"]);
    host.notify("notifications/initialized").await?;
    let tools = host.request("tools/list", json!({})).await?;
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .map(|t| t.iter().filter_map(|t| t["name"].as_str()).collect())
        .unwrap_or_default();
    println!("tools: {}", names.join(", "));

    if names.contains(&"read_text_file") {
        let inside = root.join("embed-example.txt");
        std::fs::write(&inside, "inside the root\n")?;
        for path in [inside, PathBuf::from("/etc/passwd")] {
            let read = host
                .request(
                    "tools/call",
                    json!({"name": "read_text_file", "arguments": {"path": path}}),
                )
                .await?;
            let result = &read["result"];
            let text = result["content"][0]["text"].as_str().unwrap_or_default();
            let verdict = if result["isError"] == json!(true) || result.is_null() {
                "refused"
            } else {
                "served"
            };
            println!(
                "{}: {verdict}: {}",
                path.display(),
                text.lines().next().unwrap_or("")
            );
        }
    }

    session.abort();
    Ok(())
}

type Error = Box<dyn std::error::Error>;

/// The host's end of the session: JSON-RPC lines over a stream.
struct Host {
    lines: tokio::io::Lines<BufReader<tokio::io::ReadHalf<tokio::io::DuplexStream>>>,
    out: tokio::io::WriteHalf<tokio::io::DuplexStream>,
    next_id: u64,
}

impl Host {
    fn new(stream: tokio::io::DuplexStream) -> Host {
        let (from_proxy, out) = tokio::io::split(stream);
        Host {
            lines: BufReader::new(from_proxy).lines(),
            out,
            next_id: 0,
        }
    }

    async fn send(&mut self, message: Value) -> Result<(), Error> {
        self.out
            .write_all(format!("{message}\n").as_bytes())
            .await?;
        Ok(())
    }

    async fn notify(&mut self, method: &str) -> Result<(), Error> {
        self.send(json!({"jsonrpc": "2.0", "method": method})).await
    }

    /// Send a request and wait for its answer (what comes before it is
    /// shown on stderr).
    async fn request(&mut self, method: &str, params: Value) -> Result<Value, Error> {
        self.next_id += 1;
        let id = json!(self.next_id);
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await?;
        while let Some(line) = self.lines.next_line().await? {
            let message: Value = serde_json::from_str(&line)?;
            if message["id"] == id && message.get("method").is_none() {
                return Ok(message);
            }
            eprintln!("(from the server: {line})");
        }
        Err("the session ended".into())
    }
}

/// `<ROOT> -- <SERVER COMMAND>...`
fn arguments() -> Result<(PathBuf, Vec<OsString>), String> {
    let usage = "usage: embed <ROOT> -- <SERVER COMMAND>...";
    let mut args = std::env::args_os().skip(1);
    let root = args.next().ok_or(usage)?;
    if args.next().as_deref() != Some("--".as_ref()) {
        return Err(usage.into());
    }
    let command: Vec<OsString> = args.collect();
    if command.is_empty() {
        return Err(usage.into());
    }
    let root = std::fs::canonicalize(&root).map_err(|e| format!("root {root:?}: {e}"))?;
    Ok((root, command))
}
