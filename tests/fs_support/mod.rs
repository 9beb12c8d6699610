//! Shared harness of the filesystem-server tests: a JSON-RPC client over a
//! server's stdio, the servers under test (`rootfence fs`, the reference
//! `@modelcontextprotocol/server-filesystem` releases, either one under
//! `rootfence run`), and a scratch tree with roots, a prefix sibling and
//! outside files.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use serde_json::{Value, json};

#[path = "../peer/mod.rs"]
pub mod peer;

/// What every outside file holds: a read that returns it escaped.
pub const SECRET: &str = "TOP-SECRET-OUTSIDE";

/// The built `rootfence`.
pub fn rootfence() -> String {
    env!("CARGO_BIN_EXE_rootfence").to_string()
}

/// A server under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Server {
    /// `rootfence fs --root R`, no sandbox around it.
    RootfenceFs,
    /// The reference server of the release with the known containment
    /// bugs (2025.3.28), unfenced.
    Reference2025,
    /// The same, under `rootfence run --root R`.
    Reference2025Fenced,
    /// The current reference release (tests/peers/package.json).
    Reference,
    /// `rootfence run --root R` with no command: `rootfence fs` in the
    /// sandbox.
    RunFs,
}

impl Server {
    /// The command that serves `root`.
    pub fn argv(self, root: &Path, policy: &Path) -> Vec<String> {
        let r = root.display().to_string();
        let node = || peer::node().display().to_string();
        let old = || {
            peer::server_js("server-filesystem-2025-3-28")
                .display()
                .to_string()
        };
        let run = |rest: Vec<String>| {
            let mut v = vec![
                rootfence(),
                "run".into(),
                "--no-watch".into(),
                "--policy".into(),
                policy.display().to_string(),
                "--root".into(),
                r.clone(),
            ];
            if !rest.is_empty() {
                v.push("--".into());
                v.extend(rest);
            }
            v
        };
        match self {
            Server::RootfenceFs => vec![rootfence(), "fs".into(), "--root".into(), r.clone()],
            Server::Reference2025 => vec![node(), old(), r.clone()],
            Server::Reference2025Fenced => run(vec![node(), old(), r.clone()]),
            Server::Reference => vec![
                node(),
                peer::server_js("@modelcontextprotocol/server-filesystem")
                    .display()
                    .to_string(),
                r.clone(),
            ],
            Server::RunFs => run(Vec::new()),
        }
    }
}

/// A JSON-RPC client on a server's stdin/stdout, after the handshake (no
/// roots capability declared: the server serves its command line's).
pub struct Client {
    child: Child,
    stdin: ChildStdin,
    rx: mpsc::Receiver<Value>,
    next: u64,
}

impl Client {
    /// Start `argv` and shake hands.
    pub fn start(argv: &[String]) -> Client {
        let mut child = Command::new(&argv[0])
            .args(&argv[1..])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {argv:?}: {e}"));
        let stdin = child.stdin.take().expect("piped stdin");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Ok(v) = serde_json::from_str::<Value>(&line)
                    && tx.send(v).is_err()
                {
                    break;
                }
            }
        });
        let mut c = Client {
            child,
            stdin,
            rx,
            next: 100,
        };
        let init = c.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}),
        );
        assert!(init.get("result").is_some(), "{argv:?}: initialize: {init}");
        c.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        c
    }

    /// Write one message.
    pub fn send(&mut self, v: &Value) {
        let mut line = v.to_string();
        line.push('\n');
        self.stdin
            .write_all(line.as_bytes())
            .and_then(|()| self.stdin.flush())
            .expect("write to the server");
    }

    /// Send requests and wait for all their responses (in any order).
    pub fn requests(&mut self, reqs: &[(&str, Value)]) -> Vec<Value> {
        let ids: Vec<u64> = reqs
            .iter()
            .map(|(method, params)| {
                self.next += 1;
                let id = self.next;
                self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
                id
            })
            .collect();
        let mut got: Vec<Option<Value>> = vec![None; ids.len()];
        while got.iter().any(Option::is_none) {
            let v = self
                .rx
                .recv_timeout(Duration::from_secs(60))
                .expect("the server answers within 60 s");
            if let Some(i) = v
                .get("id")
                .and_then(Value::as_u64)
                .and_then(|id| ids.iter().position(|x| *x == id))
            {
                got[i] = Some(v);
            }
        }
        got.into_iter().flatten().collect()
    }

    /// One request's whole response.
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        self.requests(&[(method, params)]).remove(0)
    }

    /// A tool call: whether it is an error result, and its text.
    pub fn call(&mut self, tool: &str, args: Value) -> Reply {
        let v = self.request("tools/call", json!({"name": tool, "arguments": args}));
        Reply::of(&v)
    }

    /// Many tool calls pipelined.
    pub fn calls(&mut self, calls: &[(&str, Value)]) -> Vec<Reply> {
        let reqs: Vec<(&str, Value)> = calls
            .iter()
            .map(|(t, a)| ("tools/call", json!({"name": t, "arguments": a})))
            .collect();
        self.requests(&reqs).iter().map(Reply::of).collect()
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A tool call's outcome.
#[derive(Debug, Clone)]
pub struct Reply {
    /// An error result (or a JSON-RPC error).
    pub error: bool,
    /// The text of its content blocks.
    pub text: String,
    /// The whole result.
    pub result: Value,
}

impl Reply {
    fn of(v: &Value) -> Reply {
        match v.get("result") {
            Some(r) => Reply {
                error: r.get("isError").and_then(Value::as_bool).unwrap_or(false),
                text: r["content"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .filter_map(|c| c.get("text").and_then(Value::as_str))
                            .collect::<Vec<_>>()
                            .join("\n")
                    })
                    .unwrap_or_default(),
                result: r.clone(),
            },
            None => Reply {
                error: true,
                text: v["error"].to_string(),
                result: v.clone(),
            },
        }
    }
}

/// A scratch tree:
///
/// ```text
/// <base>/r                 the root
/// <base>/r/inside          "inside"
/// <base>/r/sub/file        "sub file"
/// <base>/r-evil/secret     SECRET (shares the root's name as a prefix)
/// <base>/outside/secret    SECRET
/// <base>/policy.toml       the default policy (for the fenced servers)
/// ```
pub struct Fx {
    _tmp: tempfile::TempDir,
    pub base: PathBuf,
    pub r: PathBuf,
    pub evil: PathBuf,
    pub out: PathBuf,
    pub policy: PathBuf,
}

impl Fx {
    pub fn new() -> Fx {
        let tmp = tempfile::Builder::new()
            .prefix("rootfence-fs-")
            .tempdir()
            .expect("tempdir");
        let base = std::fs::canonicalize(tmp.path()).expect("canonical");
        let fx = Fx {
            r: base.join("r"),
            evil: base.join("r-evil"),
            out: base.join("outside"),
            policy: base.join("policy.toml"),
            base,
            _tmp: tmp,
        };
        for d in [fx.r.join("sub"), fx.evil.clone(), fx.out.clone()] {
            std::fs::create_dir_all(d).expect("mkdir");
        }
        std::fs::write(fx.r.join("inside"), "inside").expect("write");
        std::fs::write(fx.r.join("sub/file"), "sub file").expect("write");
        std::fs::write(fx.evil.join("secret"), SECRET).expect("write");
        std::fs::write(fx.out.join("secret"), SECRET).expect("write");
        std::fs::write(
            &fx.policy,
            format!("[roots]\nallow_under = [\"{}\"]\n", fx.base.display()),
        )
        .expect("write");
        fx
    }

    /// `<base>/r/<rel>` as text.
    pub fn rs(&self, rel: &str) -> String {
        self.r.join(rel).display().to_string()
    }

    /// A symbolic link at `<base>/r/<link>` to `target`.
    pub fn link(&self, target: impl AsRef<Path>, link: &str) {
        let l = self.r.join(link);
        if let Some(p) = l.parent() {
            std::fs::create_dir_all(p).expect("mkdir");
        }
        std::os::unix::fs::symlink(target, l).expect("symlink");
    }

    /// The server `s` serving the root.
    pub fn start(&self, s: Server) -> Client {
        Client::start(&s.argv(&self.r, &self.policy))
    }
}

/// The contents of `p`, or "" when it cannot be read.
pub fn content(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_default()
}
