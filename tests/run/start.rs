//! Start-up with roots from the host only (how VS Code launches servers):
//! the first session starts the server twice (once for `initialize`, once
//! under the host's roots) and remembers the server's `initialize` answer;
//! the next session of the same command answers `initialize` from memory
//! and starts the server once, under the host's roots.

use crate::common;

use common::fake_server;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::{Value, json};

struct Outcome {
    init: Value,
    inside: Value,
    outside: Value,
    told: Value,
    launches: usize,
}

/// One session: the host declares roots, answers `roots/list` with `root`,
/// reads a file inside and one outside, and asks the server its roots.
fn session(home: &Path, root: &Path, outside: &Path) -> Outcome {
    let mut child = Command::new(env!("CARGO_BIN_EXE_rootfence"))
        .args(["run", "--no-watch", "--"])
        .arg(fake_server())
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", home)
        .env("RUST_LOG", "info")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut send = |v: Value| {
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    };
    let mut recv = || {
        let mut line = String::new();
        assert!(
            stdout.read_line(&mut line).unwrap() > 0,
            "rootfence closed stdout"
        );
        serde_json::from_str::<Value>(&line).unwrap()
    };
    send(
        json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{"roots":{"listChanged":true}},"clientInfo":{"name":"t","version":"1"}}}),
    );
    let init = recv();
    send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    send(
        json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read","arguments":{"path": root.join("f.txt")}}}),
    );
    send(
        json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read","arguments":{"path": outside}}}),
    );
    send(
        json!({"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"roots","arguments":{}}}),
    );
    let mut answers = std::collections::HashMap::new();
    while answers.len() < 3 {
        let m = recv();
        if m["method"] == "roots/list" {
            let uri = rootfence::roots::path_to_uri(root);
            send(
                json!({"jsonrpc":"2.0","id":m["id"],"result":{"roots":[{"uri":uri,"name":"project"}]}}),
            );
        } else if let Some(id) = m["id"].as_i64() {
            answers.insert(id, m);
        }
    }
    drop(stdin);
    let _ = child.wait();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let text = |v: &Value| v["result"]["content"][0]["text"].clone();
    Outcome {
        init,
        inside: text(&answers[&1]),
        outside: answers[&2].clone(),
        told: text(&answers[&3]),
        launches: err.matches("launching the server for the target").count(),
    }
}

#[test]
fn the_second_session_starts_the_server_once_under_the_hosts_roots() {
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let (home, root, outside) = (base.join("home"), base.join("project"), base.join("secret"));
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(root.join("f.txt"), "in the project").unwrap();
    std::fs::write(&outside, "secret").unwrap();

    let first = session(&home, &root, &outside);
    assert_eq!(first.launches, 2);
    let second = session(&home, &root, &outside);
    assert_eq!(
        second.launches, 1,
        "one start when initialize is remembered"
    );

    for s in [&first, &second] {
        assert_eq!(s.init["result"]["serverInfo"]["name"], "fake", "{}", s.init);
        assert_eq!(s.inside, "in the project");
        // The host's root is enforced, nothing else.
        let denied = s.outside["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(
            denied.contains("Permission denied") || denied.contains("No such file"),
            "{}",
            s.outside
        );
        let told: Value = serde_json::from_str(s.told.as_str().unwrap()).unwrap();
        assert_eq!(
            told["roots"],
            json!([{"uri": rootfence::roots::path_to_uri(&root), "name": "project"}])
        );
    }
    // The host got the same answer both times.
    assert_eq!(first.init["result"], second.init["result"]);
    // The remembered answer lives in the user's cache, beside its MAC key.
    let dir = home.join(".cache/rootfence/initialize");
    let entries: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(
        entries.iter().filter(|n| n.ends_with(".json")).count(),
        1,
        "{entries:?}"
    );
    assert!(entries.iter().any(|n| n == "mac-key"), "{entries:?}");
}
