//! Events that overlap, tried as a host would: the real `rootfence run`
//! binary (sandboxed for real), a scripted host over its pipes, and the
//! fake server (`examples/mcp_fake_server.rs`) made slow to start through
//! the policy's `[env] set`, so that changes land while a server is still
//! starting.
//!
//! The host answers rootfence's `roots/list` at once with whatever the
//! test set last. Every wait has a generous liveness bound (an answer that
//! never comes fails the test instead of hanging it); no test asserts how
//! long anything took.

use crate::common;

use common::fake_server;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

/// How long any single answer may take before the test fails.
const LIVENESS: Duration = Duration::from_secs(20);

fn uri(p: &Path) -> String {
    rootfence::roots::path_to_uri(p)
}

/// A tree: roots `a`, `b`, `c` with a file each, and a home.
struct Tree {
    _dir: tempfile::TempDir,
    base: PathBuf,
}

impl Tree {
    fn new() -> Tree {
        let dir = tempfile::tempdir().unwrap();
        let base = std::fs::canonicalize(dir.path()).unwrap();
        for d in ["a", "b", "c", "home"] {
            std::fs::create_dir_all(base.join(d)).unwrap();
        }
        for d in ["a", "b", "c"] {
            std::fs::write(base.join(d).join("f.txt"), format!("file in {d}")).unwrap();
        }
        Tree { _dir: dir, base }
    }

    fn p(&self, rel: &str) -> PathBuf {
        self.base.join(rel)
    }

    /// A policy file: the tree as ceiling, short limits, a server that
    /// takes `delay_ms` to start with `env` added to `[env] set`, and
    /// `extra` TOML after the `[limits]` keys (more limits first, then
    /// other tables).
    fn policy(&self, name: &str, delay_ms: u64, env: &str, extra: &str) -> PathBuf {
        let path = self.base.join(name);
        self.write_policy(&path, delay_ms, env, extra);
        path
    }

    fn write_policy(&self, path: &Path, delay_ms: u64, env: &str, extra: &str) {
        let mut limits = String::new();
        for (k, v) in [
            ("rebuild_debounce_ms", "20"),
            ("drain_timeout_ms", "3000"),
            ("shutdown_grace_ms", "300"),
            ("restart_backoff_ms", "50"),
        ] {
            if !extra.contains(k) {
                limits.push_str(&format!("{k} = {v}\n"));
            }
        }
        let text = format!(
            "[roots]\nallow_under = [\"{}\"]\n[env]\nset = {{ FAKE_START_DELAY_MS = \"{delay_ms}\"{env} }}\n[limits]\n{limits}{extra}",
            self.base.display()
        );
        // Write next to it and rename over it: the watcher sees one change.
        let tmp = path.with_extension("tmp");
        std::fs::write(&tmp, text).unwrap();
        std::fs::rename(&tmp, path).unwrap();
    }
}

/// One message from rootfence: its text and its parsed value.
type Msg = (String, Value);

/// `rootfence run` with a scripted host.
struct Fenced {
    child: Child,
    stdin: Arc<Mutex<Option<ChildStdin>>>,
    rx: mpsc::Receiver<Msg>,
    /// What the host answers to `roots/list`.
    roots: Arc<Mutex<Value>>,
    /// `roots/list` requests the host answered.
    roots_asked: Arc<Mutex<usize>>,
    /// rootfence's log lines.
    log: Arc<Mutex<Vec<String>>>,
    /// Messages read while waiting for another.
    seen: Vec<Msg>,
}

impl Fenced {
    fn start(args: &[&str], home: &Path) -> Fenced {
        let mut child = Command::new(env!("CARGO_BIN_EXE_rootfence"))
            .env("HOME", home)
            // The watcher says when it watches the roots.
            .env("RUST_LOG", "info,rootfence::watch=debug")
            .args(["--log", "info", "run"])
            .args(args)
            .arg("--")
            .arg(fake_server())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = Arc::new(Mutex::new(child.stdin.take()));
        let roots = Arc::new(Mutex::new(json!([])));
        let roots_asked = Arc::new(Mutex::new(0));
        let log = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = mpsc::channel();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        {
            let (stdin, roots, asked) = (stdin.clone(), roots.clone(), roots_asked.clone());
            std::thread::spawn(move || {
                for line in stdout.lines() {
                    let Ok(line) = line else { break };
                    let v: Value = serde_json::from_str(&line)
                        .unwrap_or_else(|e| panic!("not JSON from rootfence: {e}: {line}"));
                    // rootfence's own warnings to the host (here, the test's
                    // environment left out of the server's): not what these
                    // tests read.
                    if v["method"] == "notifications/message"
                        && v["params"]["logger"] == "rootfence"
                    {
                        continue;
                    }
                    if v["method"] == "roots/list" {
                        let answer = json!({"jsonrpc":"2.0","id":v["id"],"result":{"roots":roots.lock().unwrap().clone()}});
                        *asked.lock().unwrap() += 1;
                        if let Some(w) = stdin.lock().unwrap().as_mut() {
                            let _ = writeln!(w, "{answer}");
                            let _ = w.flush();
                        }
                        continue;
                    }
                    if tx.send((line, v)).is_err() {
                        break;
                    }
                }
            });
        }
        let stderr = BufReader::new(child.stderr.take().unwrap());
        {
            let log = log.clone();
            std::thread::spawn(move || {
                for line in stderr.lines() {
                    let Ok(line) = line else { break };
                    eprintln!("{line}");
                    log.lock().unwrap().push(line);
                }
            });
        }
        Fenced {
            child,
            stdin,
            rx,
            roots,
            roots_asked,
            log,
            seen: Vec::new(),
        }
    }

    fn set_roots(&self, dirs: &[&Path]) {
        *self.roots.lock().unwrap() = dirs.iter().map(|d| json!({"uri": uri(d)})).collect();
    }

    fn send_raw(&self, s: &str) {
        let mut g = self.stdin.lock().unwrap();
        let w = g.as_mut().expect("stdin still open");
        writeln!(w, "{s}").unwrap();
        w.flush().unwrap();
    }

    fn send(&self, v: Value) {
        self.send_raw(&v.to_string());
    }

    fn close_stdin(&self) {
        self.stdin.lock().unwrap().take();
    }

    fn recv(&mut self) -> Msg {
        match self.rx.recv_timeout(LIVENESS) {
            Ok(m) => m,
            Err(e) => panic!(
                "no message from rootfence within {LIVENESS:?} ({e}); seen so far: {:?}",
                self.seen.iter().map(|m| &m.0).collect::<Vec<_>>()
            ),
        }
    }

    /// The response to `id` (compared as JSON text of the id).
    fn response_raw(&mut self, id: &str) -> Msg {
        let want: Value = serde_json::from_str(id).unwrap();
        if let Some(pos) = self
            .seen
            .iter()
            .position(|(_, m)| m.get("method").is_none() && m.get("id") == Some(&want))
        {
            return self.seen.remove(pos);
        }
        loop {
            let m = self.recv();
            if m.1.get("method").is_none() && m.1.get("id") == Some(&want) {
                return m;
            }
            self.seen.push(m);
        }
    }

    fn response(&mut self, id: Value) -> Value {
        self.response_raw(&id.to_string()).1
    }

    fn call(&mut self, id: i64, tool: &str, args: Value) -> Value {
        self.send(json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":args}}));
        self.response(json!(id))
    }

    fn initialize(&mut self, version: &str, with_roots: bool) -> Value {
        let caps = if with_roots {
            json!({"roots":{"listChanged":true}})
        } else {
            json!({})
        };
        self.send(json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":version,"capabilities":caps,"clientInfo":{"name":"race-host","version":"1"}}}));
        let r = self.response(json!(0));
        assert_eq!(r["result"]["serverInfo"]["name"], "fake", "{r}");
        self.send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
        r
    }

    fn list_changed(&self) {
        self.send(json!({"jsonrpc":"2.0","method":"notifications/roots/list_changed"}));
    }

    /// The roots the server is told (its own `roots/list`, answered by
    /// rootfence).
    fn server_roots(&mut self, id: i64) -> Vec<String> {
        let v = self.call(id, "roots", json!({}));
        let inner: Value = serde_json::from_str(&text(&v)).unwrap_or_else(|_| panic!("{v}"));
        inner["roots"]
            .as_array()
            .unwrap_or_else(|| panic!("{v}"))
            .iter()
            .map(|r| r["uri"].as_str().unwrap().to_string())
            .collect()
    }

    /// Wait until rootfence logged a line containing `what`.
    fn wait_log(&self, what: &str) {
        let deadline = Instant::now() + LIVENESS;
        while !self.log.lock().unwrap().iter().any(|l| l.contains(what)) {
            assert!(Instant::now() < deadline, "rootfence never logged {what:?}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Wait until the host answered `n` roots/list requests in all.
    fn wait_roots_asked(&self, n: usize) {
        let deadline = Instant::now() + LIVENESS;
        while *self.roots_asked.lock().unwrap() < n {
            assert!(
                Instant::now() < deadline,
                "rootfence never asked for the roots a {n}th time"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn wait_exit(&mut self) -> i32 {
        let deadline = Instant::now() + LIVENESS;
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st.code().unwrap_or(-1);
            }
            assert!(Instant::now() < deadline, "rootfence did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The one server process left, once the others are gone.
    fn only_server(&self) -> u32 {
        let deadline = Instant::now() + LIVENESS;
        loop {
            let pids = self.server_pids();
            if pids.len() == 1 {
                return pids[0];
            }
            assert!(Instant::now() < deadline, "servers left: {pids:?}");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The server processes rootfence has started and not yet reaped.
    fn server_pids(&self) -> Vec<u32> {
        let mut out = Vec::new();
        let tasks = format!("/proc/{}/task", self.child.id());
        for t in std::fs::read_dir(tasks).unwrap().flatten() {
            let children = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
            out.extend(
                children
                    .split_whitespace()
                    .filter_map(|p| p.parse::<u32>().ok()),
            );
        }
        out
    }
}

impl Drop for Fenced {
    fn drop(&mut self) {
        // A failed test must not leave rootfence (and its server) running.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn text(v: &Value) -> String {
    v["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// The fake server's read was refused by the fence: Landlock denies it
/// (`Permission denied`), or, with namespaces, the path is not in the
/// server's view at all (`No such file or directory`; the file exists on
/// the host, every test creates it before asking).
fn refused(v: &Value) -> bool {
    let t = text(v);
    v["result"]["isError"] == true
        && (t.contains("Permission denied") || t.contains("No such file or directory"))
}

fn error_message(v: &Value) -> String {
    v["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("expected an error: {v}"))
        .to_string()
}

// ---------------------------------------------------------------------
// Roots and policy changes racing a slow rebuild

/// Roots A, then A+B (a rebuild starts), then A again while the A+B server
/// is still starting: the A+B server must never serve, and B is never
/// readable afterwards.
#[test]
fn a_revoked_root_does_not_come_back_when_it_is_revoked_during_the_rebuild() {
    for gap_ms in [150, 300, 450] {
        let t = Tree::new();
        let policy = t.policy("p.toml", 500, "", "");
        let mut f = Fenced::start(&["--policy", policy.to_str().unwrap()], &t.p("home"));
        f.set_roots(&[&t.p("a")]);
        f.initialize("2025-06-18", true);
        assert_eq!(f.server_roots(1), vec![uri(&t.p("a"))]);
        f.set_roots(&[&t.p("a"), &t.p("b")]);
        f.list_changed();
        f.wait_roots_asked(2);
        std::thread::sleep(Duration::from_millis(gap_ms));
        f.set_roots(&[&t.p("a")]);
        f.list_changed();
        f.wait_roots_asked(3);
        // Whatever server answers now, it holds A only.
        assert_eq!(f.server_roots(2), vec![uri(&t.p("a"))], "gap {gap_ms} ms");
        let b = f.call(3, "read", json!({"path": t.p("b/f.txt")}));
        assert!(refused(&b), "gap {gap_ms} ms: B is readable: {b}");
        let a = f.call(4, "read", json!({"path": t.p("a/f.txt")}));
        assert_eq!(text(&a), "file in a", "gap {gap_ms} ms");
        // Long after the slow start is over, still A only.
        std::thread::sleep(Duration::from_millis(700));
        assert_eq!(f.server_roots(5), vec![uri(&t.p("a"))], "gap {gap_ms} ms");
        let b = f.call(6, "read", json!({"path": t.p("b/f.txt")}));
        assert!(refused(&b), "gap {gap_ms} ms: {b}");
    }
}

/// A policy edit that only removes a TCP port, with a `roots/list` answer
/// arriving inside its debounce window: the port is closed anyway.
#[test]
fn a_policy_edit_removing_a_port_is_applied_when_host_roots_arrive_meanwhile() {
    let t = Tree::new();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let net =
        |ports: &str| format!("rebuild_debounce_ms = 1500\n[network]\ntcp_connect = [{ports}]\n");
    let policy = t.policy("p.toml", 300, "", &net(&port.to_string()));
    let mut f = Fenced::start(&["--policy", policy.to_str().unwrap()], &t.p("home"));
    f.set_roots(&[&t.p("a")]);
    f.initialize("2025-06-18", true);
    let before = text(&f.call(1, "instance", json!({})));
    let c = f.call(2, "connect", json!({"port": port}));
    assert_eq!(text(&c), "connected", "the port is open at first: {c}");
    // Remove the port; while the edit waits for its debounce, the host
    // announces a change and answers with the same roots.
    t.write_policy(&policy, 300, "", &net(""));
    f.wait_log("policy changed on disk");
    f.list_changed();
    f.wait_roots_asked(2);
    // The port must be closed: the server is relaunched without it.
    let deadline = Instant::now() + LIVENESS;
    let mut id = 10;
    loop {
        id += 1;
        let now = text(&f.call(id, "instance", json!({})));
        if now != before {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the server was never relaunched after the policy edit"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let c = f.call(100, "connect", json!({"port": port}));
    assert!(refused(&c), "the removed port is still open: {c}");
    drop(listener);
}

/// A change before the first handshake is through (a root directory
/// renamed while the first server is still starting) is applied, not
/// discarded.
#[test]
fn a_change_before_the_first_handshake_is_applied() {
    let t = Tree::new();
    let policy = t.policy("p.toml", 500, "", "");
    let (a, b) = (t.p("a"), t.p("b"));
    let mut f = Fenced::start(
        &[
            "--policy",
            policy.to_str().unwrap(),
            "--root",
            a.to_str().unwrap(),
            "--root",
            b.to_str().unwrap(),
        ],
        &t.p("home"),
    );
    f.send(json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"race-host","version":"1"}}}));
    // The server is launched with A and B and takes 500 ms to answer;
    // its roots are watched.
    f.wait_log("watching 3 directories");
    std::fs::rename(&b, t.p("b-moved")).unwrap();
    let init = f.response(json!(0));
    assert_eq!(init["result"]["serverInfo"]["name"], "fake", "{init}");
    f.send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    assert_eq!(f.server_roots(1), vec![uri(&a)]);
    let moved = f.call(2, "read", json!({"path": t.p("b-moved/f.txt")}));
    assert!(refused(&moved), "{moved}");
}

// ---------------------------------------------------------------------
// Servers that do not answer

/// A server that never answers `initialize`: the host gets an error after
/// `limits.initialize_timeout_ms`, and rootfence ends the session.
#[test]
fn a_server_that_never_answers_initialize_gets_the_host_an_error() {
    let t = Tree::new();
    let policy = t.policy(
        "p.toml",
        0,
        ", FAKE_NO_INIT = \"1\"",
        "initialize_timeout_ms = 2000\n",
    );
    let mut f = Fenced::start(&["--policy", policy.to_str().unwrap()], &t.p("home"));
    f.send(json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"race-host","version":"1"}}}));
    let r = f.response(json!(0));
    let msg = error_message(&r);
    assert!(
        msg.contains("limits.initialize_timeout_ms = 2000"),
        "the error names the limit: {r}"
    );
    assert_eq!(f.wait_exit(), 1);
}

/// A server that closes its stdout but keeps running is treated as gone:
/// its request in flight is answered with an error, it is stopped, and
/// the next request is answered by a restarted server.
#[test]
fn a_server_that_closes_stdout_is_replaced_and_requests_still_answered() {
    let t = Tree::new();
    let policy = t.policy("p.toml", 0, "", "");
    let a = t.p("a");
    let mut f = Fenced::start(
        &[
            "--policy",
            policy.to_str().unwrap(),
            "--root",
            a.to_str().unwrap(),
        ],
        &t.p("home"),
    );
    f.initialize("2025-06-18", false);
    let first = text(&f.call(1, "instance", json!({})));
    let old = f.only_server();
    let closed = f.call(2, "close_stdout", json!({}));
    let msg = error_message(&closed);
    assert!(msg.contains("stdout"), "{closed}");
    let second = text(&f.call(3, "instance", json!({})));
    assert!(!second.is_empty() && second != first, "{first} / {second}");
    assert!(
        !f.server_pids().contains(&old),
        "the server that closed its stdout still runs"
    );
    f.close_stdin();
    assert_eq!(f.wait_exit(), 0);
}

/// Host requests with ids `0` and `-0` in flight together (equal as JSON
/// numbers): both are answered, the second as a duplicate id in flight.
#[test]
fn ids_equal_as_json_numbers_are_one_id() {
    let t = Tree::new();
    let policy = t.policy("p.toml", 0, "", "");
    let mut f = Fenced::start(&["--policy", policy.to_str().unwrap()], &t.p("home"));
    f.initialize("2025-06-18", false);
    f.send_raw(r#"{"jsonrpc":"2.0","id":0,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":300}}}"#);
    f.send_raw(r#"{"jsonrpc":"2.0","id":-0,"method":"ping"}"#);
    let (first, v) = f.recv();
    assert!(first.contains(r#""id":-0"#), "{first}");
    assert_eq!(v["error"]["code"], -32600, "{first}");
    assert!(error_message(&v).contains("already in use"), "{first}");
    let (second, v) = f.recv();
    assert_eq!(text(&v), "slept", "{second}");
}

// ---------------------------------------------------------------------
// Crashes during a rebuild

/// The current server crashes while a rebuild is in flight: the session
/// ends up on the new roots (the rising server), not on the old ones.
#[test]
fn a_crash_during_a_rebuild_keeps_the_new_roots() {
    let t = Tree::new();
    let policy = t.policy("p.toml", 500, "", "");
    let mut f = Fenced::start(&["--policy", policy.to_str().unwrap()], &t.p("home"));
    f.set_roots(&[&t.p("a")]);
    f.initialize("2025-06-18", true);
    assert_eq!(f.server_roots(1), vec![uri(&t.p("a"))]);
    let s = f.call(2, "crash_later", json!({"ms": 200}));
    assert_eq!(text(&s), "scheduled");
    f.set_roots(&[&t.p("b")]);
    f.list_changed();
    f.wait_roots_asked(2);
    assert_eq!(f.server_roots(3), vec![uri(&t.p("b"))]);
    std::thread::sleep(Duration::from_millis(800));
    assert_eq!(f.server_roots(4), vec![uri(&t.p("b"))]);
    let b = f.call(5, "read", json!({"path": t.p("b/f.txt")}));
    assert_eq!(text(&b), "file in b", "{b}");
}

// ---------------------------------------------------------------------
// Revocation

/// A root revoked by the host: the server holding it is stopped at once
/// (not drained), its request in flight gets an error naming the
/// revocation, and a request sent after the change is answered by a
/// server without the root, after the old process is gone.
#[test]
fn a_revoked_root_ends_its_server_before_anything_else() {
    let t = Tree::new();
    let policy = t.policy("p.toml", 200, "", "drain_timeout_ms = 10000\n");
    let mut f = Fenced::start(&["--policy", policy.to_str().unwrap()], &t.p("home"));
    f.set_roots(&[&t.p("a"), &t.p("b")]);
    f.initialize("2025-06-18", true);
    assert_eq!(f.server_roots(1).len(), 2);
    let old = f.only_server();
    f.send(json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sleep","arguments":{"ms":8000}}}));
    f.set_roots(&[&t.p("a")]);
    f.list_changed();
    f.send(json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read","arguments":{"path": t.p("b/f.txt")}}}));
    let slow = f.response(json!(2));
    let msg = error_message(&slow);
    assert!(msg.contains("revoked"), "{slow}");
    assert!(msg.contains(&t.p("b").display().to_string()), "{slow}");
    let read = f.response(json!(3));
    assert!(refused(&read), "{read}");
    assert!(
        !f.server_pids().contains(&old),
        "the server holding the revoked root still runs"
    );
    assert_eq!(f.server_roots(4), vec![uri(&t.p("a"))]);
}

// ---------------------------------------------------------------------
// Batches and notifications during a rebuild

/// A batch member that is itself an array is answered inside the batch
/// as an invalid request; the batch's reply is sent.
#[test]
fn a_nested_batch_member_is_answered_inside_its_batch() {
    let t = Tree::new();
    let policy = t.policy("p.toml", 0, "", "");
    let mut f = Fenced::start(&["--policy", policy.to_str().unwrap()], &t.p("home"));
    f.initialize("2025-03-26", false);
    f.send_raw(r#"[{"jsonrpc":"2.0","id":"p","method":"ping"},[{"jsonrpc":"2.0","id":"n","method":"ping"}]]"#);
    let (raw, v) = f.recv();
    let arr = v
        .as_array()
        .unwrap_or_else(|| panic!("not a batch reply: {raw}"));
    assert_eq!(arr.len(), 2, "{raw}");
    assert!(
        arr.iter()
            .any(|m| m["id"] == "p" && m["result"] == json!({})),
        "{raw}"
    );
    assert!(arr.iter().any(|m| m["error"]["code"] == -32600), "{raw}");
}

/// A batch held during a rebuild, one of whose requests the host cancels
/// before it is sent: the batch is answered without it.
#[test]
fn a_cancelled_queued_batch_member_does_not_hold_the_batch() {
    let t = Tree::new();
    let policy = t.policy("p.toml", 500, "", "");
    let mut f = Fenced::start(&["--policy", policy.to_str().unwrap()], &t.p("home"));
    f.set_roots(&[&t.p("a")]);
    f.initialize("2025-03-26", true);
    f.server_roots(1);
    f.set_roots(&[&t.p("b")]);
    f.list_changed();
    f.wait_roots_asked(2);
    // The rebuilt server takes 500 ms: this batch is held meanwhile.
    f.send_raw(r#"[{"jsonrpc":"2.0","id":"a","method":"ping"},{"jsonrpc":"2.0","id":"b","method":"tools/call","params":{"name":"sleep","arguments":{"ms":10}}}]"#);
    f.send(json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"b","reason":"changed my mind"}}));
    let (raw, v) = f.recv();
    let arr = v
        .as_array()
        .unwrap_or_else(|| panic!("not a batch reply: {raw}"));
    assert_eq!(arr.len(), 1, "{raw}");
    assert_eq!(arr[0]["id"], "a", "{raw}");
}

/// The host's progress notifications about a server request reach the
/// server that sent it, also when another server has replaced it since.
#[test]
fn host_progress_reaches_the_generation_that_asked() {
    let t = Tree::new();
    let policy = t.policy("p.toml", 100, "", "[sampling]\nallow = true\n");
    let mut f = Fenced::start(&["--policy", policy.to_str().unwrap()], &t.p("home"));
    f.set_roots(&[&t.p("a")]);
    f.initialize("2025-06-18", true);
    let old = text(&f.call(1, "instance", json!({})));
    f.send(json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"sample_progress","arguments":{}}}));
    let (raw, req) = f.recv();
    assert_eq!(req["method"], "sampling/createMessage", "{raw}");
    let token = req["params"]["_meta"]["progressToken"].clone();
    assert!(!token.is_null(), "{raw}");
    // A root is added: a new server replaces the one waiting for us,
    // which drains (nothing was revoked).
    f.set_roots(&[&t.p("a"), &t.p("b")]);
    f.list_changed();
    f.wait_roots_asked(2);
    assert_eq!(f.server_roots(3).len(), 2);
    assert_ne!(text(&f.call(4, "instance", json!({}))), old);
    f.send(json!({"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":token,"progress":1,"total":2}}));
    f.send(json!({"jsonrpc":"2.0","id":req["id"],"result":{"role":"assistant","content":{"type":"text","text":"done"},"model":"m"}}));
    let done = f.response(json!(2));
    let report: Value = serde_json::from_str(&text(&done)).unwrap_or_else(|_| panic!("{done}"));
    let progress = report["progress"]
        .as_array()
        .unwrap_or_else(|| panic!("{done}"));
    assert_eq!(progress.len(), 1, "the old server got the progress: {done}");
    assert_eq!(progress[0]["progressToken"], "progress-1", "{done}");
}
