//! The `rootfence run` binary with a scripted host (this test, over pipes)
//! and the scriptable fake server, sandboxed for real.

use crate::common;

use common::fake_server;

use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

struct Session {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Session {
    fn start(args: &[&str]) -> Session {
        Session::start_with_home(args, None)
    }

    fn start_with_home(args: &[&str], home: Option<&std::path::Path>) -> Session {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_rootfence"));
        if let Some(h) = home {
            cmd.env("HOME", h);
        }
        let mut child = cmd
            .arg("run")
            .args(args)
            .arg("--")
            .arg(fake_server())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Session {
            child,
            stdin,
            stdout,
        }
    }

    fn send(&mut self, v: Value) {
        let w = self.stdin.as_mut().unwrap();
        writeln!(w, "{v}").unwrap();
        w.flush().unwrap();
    }

    /// The next message, past rootfence's own warnings to the host (here,
    /// the test's environment left out of the server's).
    fn recv(&mut self) -> Value {
        loop {
            let mut line = String::new();
            assert!(
                self.stdout.read_line(&mut line).unwrap() > 0,
                "rootfence closed stdout"
            );
            let v: Value = serde_json::from_str(&line).unwrap();
            if v["method"] != "notifications/message" || v["params"]["logger"] != "rootfence" {
                return v;
            }
        }
    }

    fn call(&mut self, id: i64, tool: &str, args: Value) -> Value {
        self.send(json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":tool,"arguments":args}}));
        self.recv()
    }

    fn initialize(&mut self) {
        self.send(json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}));
        let r = self.recv();
        assert_eq!(r["result"]["serverInfo"]["name"], "fake", "{r}");
        self.send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    }

    fn wait_exit(&mut self) -> i32 {
        for _ in 0..200 {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st.code().unwrap_or(-1);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        panic!("rootfence did not exit");
    }
}

impl Drop for Session {
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

fn tree() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir_all(base.join("root")).unwrap();
    std::fs::create_dir_all(base.join("other")).unwrap();
    std::fs::write(base.join("root/in.txt"), "in").unwrap();
    std::fs::write(base.join("other/out.txt"), "out").unwrap();
    std::fs::create_dir_all(base.join("home/.ssh")).unwrap();
    std::fs::write(base.join("home/.ssh/id_rsa"), "PRIVATE KEY").unwrap();
    std::fs::write(base.join("home/notes.txt"), "personal").unwrap();
    (dir, base)
}

/// An error text of a refused file operation: Landlock's, or in the
/// server's own view a path that is not there or a read-only mount.
fn refused(text: &str) -> bool {
    ["Permission denied", "No such file", "Read-only file system"]
        .iter()
        .any(|w| text.contains(w))
}

#[test]
fn the_server_is_confined_to_its_roots_and_told_exactly_them() {
    let (_d, base) = tree();
    let root = base.join("root");
    let mut s = Session::start_with_home(
        &["--root", root.to_str().unwrap()],
        Some(&base.join("home")),
    );
    s.initialize();
    assert_eq!(
        text(&s.call(1, "read", json!({"path": root.join("in.txt")}))),
        "in"
    );
    let out = s.call(2, "read", json!({"path": base.join("other/out.txt")}));
    assert!(refused(&text(&out)), "{out}");
    let w = s.call(
        3,
        "write",
        json!({"path": root.join("new.txt"), "text": "w"}),
    );
    assert_eq!(text(&w), "ok");
    assert_eq!(std::fs::read_to_string(root.join("new.txt")).unwrap(), "w");
    let w = s.call(
        4,
        "write",
        json!({"path": base.join("other/new.txt"), "text": "w"}),
    );
    assert!(refused(&text(&w)), "{w}");
    assert!(!base.join("other/new.txt").exists());
    for f in ["home/notes.txt", "home/.ssh/id_rsa"] {
        let secret = s.call(5, "read", json!({"path": base.join(f)}));
        assert!(refused(&text(&secret)), "{f}: {secret}");
    }
    let roots = s.call(6, "roots", json!({}));
    let inner: Value = serde_json::from_str(&text(&roots)).unwrap();
    assert_eq!(
        inner["roots"],
        json!([{"uri": rootfence::roots::path_to_uri(&root), "name": "root"}])
    );
    // Host EOF: rootfence shuts the server down and exits 0.
    drop(s.stdin.take());
    assert_eq!(s.wait_exit(), 0);
}

#[test]
fn a_crash_with_restart_never_ends_the_session_with_an_error() {
    let (d, base) = tree();
    let policy = d.path().join("p.toml");
    std::fs::write(&policy, "[limits]\nrestart = \"never\"\n").unwrap();
    let root = base.join("root");
    let mut s = Session::start(&[
        "--policy",
        policy.to_str().unwrap(),
        "--root",
        root.to_str().unwrap(),
    ]);
    s.initialize();
    let r = s.call(1, "crash", json!({}));
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("exited (exit code 3)"),
        "{r}"
    );
    assert_eq!(s.wait_exit(), 1);
}

#[test]
fn refused_command_line_roots_are_reported_and_the_rest_enforced() {
    let (_d, base) = tree();
    let root = base.join("root");
    let mut s = Session::start(&[
        "--root",
        root.to_str().unwrap(),
        "--root",
        "file:///tmp/%2e%2e/etc",
    ]);
    s.initialize();
    let roots = s.call(1, "roots", json!({}));
    let inner: Value = serde_json::from_str(&text(&roots)).unwrap();
    assert_eq!(inner["roots"].as_array().unwrap().len(), 1);
    drop(s.stdin.take());
    assert_eq!(s.wait_exit(), 0);
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// The pages of rootfence's program file it has touched (`RssFile`): part
/// of its resident set whatever it holds for messages, and about 21 MiB
/// in a debug build against a few in a release one.
fn rss_file_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("RssFile:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// A host that sends big requests faster than the server takes them (the
/// server blocks on its own output, which the host does not read) is held
/// back by the pipes as well: rootfence reads only a little ahead of what
/// it can forward, never the whole backlog, and nothing is lost.
#[test]
fn a_host_sending_faster_than_the_server_reads_is_held_back() {
    let (_d, base) = tree();
    let root = base.join("root");
    let mut s = Session::start(&["--root", root.to_str().unwrap()]);
    s.initialize();
    let (n, size) = (24, 2 << 20);
    let mut w = s.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let payload = "x".repeat(size);
        for i in 0..n {
            let m = json!({"jsonrpc":"2.0","id":100 + i,"method":"tools/call","params":{"name":"echo","arguments":{"text":payload}}});
            writeln!(w, "{m}").unwrap();
        }
        w.flush().unwrap();
        w
    });
    // Nothing is read for a while: 48 MiB each way wait to be relayed.
    std::thread::sleep(Duration::from_millis(2000));
    // What rootfence held at its peak, without its program's own pages
    // (read now: at least as many as at the peak).
    let peak = peak_rss_kib(s.child.id()) - rss_file_kib(s.child.id());
    for i in 0..n {
        let m = s.recv();
        assert_eq!(m["id"], 100 + i);
        assert_eq!(text(&m).len(), size, "answer {i} cut short");
    }
    drop(writer.join().unwrap());
    assert_eq!(s.wait_exit(), 0);
    // About a dozen messages' worth before the reads were bounded in bytes;
    // now a few in each direction.
    assert!(
        peak < 24 * 1024,
        "rootfence peaked at {peak} KiB with {n} messages of {size} bytes queued"
    );
}

/// A server that writes faster than the host reads is held back by the
/// pipes: rootfence's memory stays bounded, and nothing is lost.
#[test]
fn a_flooding_server_is_held_back_and_nothing_is_lost() {
    let (_d, base) = tree();
    let root = base.join("root");
    let mut s = Session::start(&["--root", root.to_str().unwrap()]);
    s.initialize();
    let count = 100;
    s.send(json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"flood","arguments":{"count":count,"bytes":1_048_576}}}));
    // Do not read for a while: 100 MiB are waiting to be relayed.
    std::thread::sleep(Duration::from_millis(1500));
    let rss = rss_kib(s.child.id());
    assert!(
        rss < 48 * 1024,
        "rootfence holds {rss} KiB while the host does not read"
    );
    let mut notes = 0;
    loop {
        let m = s.recv();
        if m["method"] == "notifications/message" {
            notes += 1;
            continue;
        }
        assert_eq!(text(&m), "flooded", "{m}");
        break;
    }
    assert_eq!(notes, count);
    drop(s.stdin.take());
    assert_eq!(s.wait_exit(), 0);
}

/// A host that writes its whole session and closes stdin at once (a pipe,
/// a script, a host shutting down) against `rootfence run` with `args`:
/// every request is answered, and rootfence exits. Returns the answers by
/// id.
fn piped_session(args: &[&str], lines: &[Value]) -> std::collections::BTreeMap<String, Value> {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rootfence"))
        .arg("run")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    for l in lines {
        writeln!(stdin, "{l}").unwrap();
    }
    drop(stdin);
    let stdout = BufReader::new(child.stdout.take().unwrap());
    let mut answers = std::collections::BTreeMap::new();
    for line in stdout.lines() {
        let v: Value = serde_json::from_str(&line.unwrap()).unwrap();
        if let Some(id) = v.get("id") {
            answers.insert(id.to_string(), v);
        }
    }
    let status = child.wait().unwrap();
    assert!(status.success(), "rootfence exited with {status}");
    answers
}

fn pipe_lines(path: &str) -> Vec<Value> {
    vec![
        json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"pipe","version":"1"}}}),
        json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
        json!({"jsonrpc":"2.0","id":2,"method":"tools/list"}),
        json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read_text_file","arguments":{"path":path}}}),
    ]
}

#[test]
fn a_session_written_at_once_and_closed_is_answered_in_full() {
    // The built-in filesystem server asks for its roots after
    // `initialized`: it must still get rootfence's answer after the host
    // has closed.
    let (_d, base) = tree();
    let root = base.join("root");
    let file = root.join("in.txt");
    let answers = piped_session(
        &["--root", root.to_str().unwrap()],
        &pipe_lines(file.to_str().unwrap()),
    );
    assert!(
        answers["1"]["result"]["serverInfo"].is_object(),
        "{answers:?}"
    );
    assert!(answers["2"]["result"]["tools"].is_array(), "{answers:?}");
    assert_eq!(text(&answers["3"]), "in", "{answers:?}");
    // Outside the root: refused, not "the session is ending".
    let out = base.join("other/out.txt");
    let answers = piped_session(
        &["--root", root.to_str().unwrap()],
        &pipe_lines(out.to_str().unwrap()),
    );
    assert_eq!(answers["3"]["result"]["isError"], true, "{answers:?}");
    assert!(text(&answers["3"]).contains("Access denied"), "{answers:?}");
}

#[test]
fn a_host_that_closes_and_never_reads_its_last_answer_does_not_keep_rootfence_alive() {
    // The host asks for 8 MiB, closes its side at once and waits for
    // rootfence to exit without reading stdout: the answer cannot be
    // written (the pipe is full). rootfence gives the host the shutdown
    // grace to read it, then exits rather than waiting forever.
    let (_d, base) = tree();
    let mut s = Session::start(&["--root", base.join("root").to_str().unwrap()]);
    s.initialize();
    s.send(json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"big","arguments":{"bytes": 8 << 20}}}));
    drop(s.stdin.take());
    assert_eq!(s.wait_exit(), 0);
}
