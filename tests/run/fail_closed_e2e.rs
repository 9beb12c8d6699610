//! The relay fails closed, end to end: the built `rootfence run` between
//! the Python SDK host (tests/peers/host.py) and the hostile Python server
//! (tests/peers/hostile_server.py), which writes lines meant to be read
//! differently by different parsers, and cancels rootfence's own requests
//! to the host while the host removes a root. The bytes the host receives
//! are captured on their way (a `tee` between rootfence and the host) and
//! read five ways: Python's `json`, Python's universal newlines,
//! pydantic's reader and the SDK's own parser (tests/peers/readers.py),
//! `JSON.parse` and node's `readline` (tests/peers/readers.js); every
//! reading must be serde's. `ROOTFENCE_TEST_BIN` runs them against another
//! build (an earlier release fails both).

use crate::peer;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::{Value, json};

/// A scratch directory: roots `a` and `b` (each with a file), the policy
/// (default), and the file the host's bytes are captured in.
struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    fn new() -> Setup {
        let s = Setup {
            dir: tempfile::tempdir().unwrap(),
        };
        for d in ["a", "b"] {
            std::fs::create_dir_all(s.base().join(d)).unwrap();
            std::fs::write(s.base().join(d).join("f.txt"), format!("in {d}")).unwrap();
        }
        std::fs::write(s.policy(), "").unwrap();
        s
    }

    fn base(&self) -> PathBuf {
        std::fs::canonicalize(self.dir.path()).unwrap()
    }

    fn policy(&self) -> PathBuf {
        self.base().join("policy.toml")
    }

    fn captured(&self) -> PathBuf {
        self.base().join("to-host.jsonl")
    }

    fn uri(&self, d: &str) -> String {
        format!("file://{}", self.base().join(d).display())
    }

    /// `rootfence run` with its stdout copied to [`Setup::captured`] on
    /// its way to the host.
    fn command(&self) -> Vec<String> {
        // `ROOTFENCE_TEST_BIN` runs the attacks against another build.
        let bin = std::env::var("ROOTFENCE_TEST_BIN")
            .unwrap_or_else(|_| env!("CARGO_BIN_EXE_rootfence").to_string());
        let run = [
            bin,
            "run".into(),
            "--policy".into(),
            self.policy().display().to_string(),
            "--".into(),
            peer::python().display().to_string(),
            peer::peers()
                .join("hostile_server.py")
                .display()
                .to_string(),
        ];
        let quoted: Vec<String> = run.iter().map(|a| format!("'{a}'")).collect();
        vec![
            "/bin/sh".into(),
            "-c".into(),
            format!("{} | tee '{}'", quoted.join(" "), self.captured().display()),
        ]
    }
}

/// Read the captured bytes as serde does (each line strictly readable,
/// no carriage return), then the five other ways; every reading must be
/// serde's. Returns the messages.
fn read_five_ways(path: &Path) -> Vec<Value> {
    let data = std::fs::read(path).unwrap();
    let mut lines: Vec<&[u8]> = data.split(|c| *c == b'\n').collect();
    assert_eq!(lines.pop(), Some(&b""[..]), "the last line has no newline");
    let mut want = Vec::new();
    let mut messages = Vec::new();
    for l in &lines {
        let text = String::from_utf8_lossy(l);
        assert!(
            !l.contains(&b'\r'),
            "a carriage return reached the host: {text}"
        );
        if let Err(e) = rootfence::proxy::canonical::canonical(l) {
            panic!(
                "the host received a line it cannot read unambiguously ({}): {text}",
                e.why
            );
        }
        let v: Value = serde_json::from_slice(l).unwrap();
        want.push(Value::String(rootfence::proxy::canonical::normal_form(&v)));
        messages.push(v);
    }
    let want = Value::Array(want);
    let py = Command::new(peer::python())
        .arg(peer::peers().join("readers.py"))
        .arg(path)
        .output()
        .unwrap();
    assert!(
        py.status.success(),
        "{}",
        String::from_utf8_lossy(&py.stderr)
    );
    let py: Value = serde_json::from_slice(&py.stdout).unwrap();
    for reader in ["json", "universal", "jiter"] {
        assert_eq!(py[reader], want, "Python's {reader} reads otherwise");
    }
    let sdk = py["sdk"].as_array().unwrap();
    assert_eq!(sdk.len(), lines.len());
    assert!(sdk.iter().all(|r| r == "ok"), "the SDK's parser: {sdk:?}");
    let node = Command::new(peer::node())
        .arg(peer::peers().join("readers.js"))
        .arg(path)
        .output()
        .unwrap();
    assert!(
        node.status.success(),
        "{}",
        String::from_utf8_lossy(&node.stderr)
    );
    let node: Value = serde_json::from_slice(&node.stdout).unwrap();
    for reader in ["parse", "readline"] {
        assert_eq!(node[reader], want, "node's {reader} reads otherwise");
    }
    messages
}

fn hex(s: &[u8]) -> String {
    s.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn what_cannot_be_read_never_reaches_the_sdk_host() {
    let lines: Vec<Vec<u8>> = vec![
        // Invalid UTF-8 in a member rootfence does not read: the SDK host's
        // reader would die on it (UnicodeDecodeError).
        b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"a\"},\"z\":\"\xff\xfe\"}".to_vec(),
        // A bare carriage return between members: relayed as one line.
        b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\r\"params\":{\"level\":\"info\",\"data\":\"cr\"}}".to_vec(),
        // A second message hidden after a carriage return: to a host that
        // breaks lines there, a sampling request of its own.
        b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"x\"}}\r{\"jsonrpc\":\"2.0\",\"id\":900,\"method\":\"sampling/createMessage\",\"params\":{\"messages\":[],\"maxTokens\":9}}".to_vec(),
        // A question with a repeated key: which maxTokens is it?
        br#"{"jsonrpc":"2.0","id":901,"method":"sampling/createMessage","params":{"messages":[{"role":"user","content":{"type":"text","text":"hi"}}],"maxTokens":1,"maxTokens":90000}}"#.to_vec(),
        // A lone surrogate, a number no double holds.
        br#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":"\udc00"}}"#.to_vec(),
        br#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":1e400}}"#.to_vec(),
    ];
    for mode in [None, Some("legacy")] {
        let s = Setup::new();
        let mut scenario = json!({
            "command": s.command(),
            "roots": [[s.uri("a"), "a"]],
            "sampling": {"text": "sampled", "model": "m"},
            "steps": [
                {"call": "raw_bytes", "args": {"lines": lines.iter().map(|l| hex(l)).collect::<Vec<_>>()}},
                {"call": "read", "args": {"path": s.base().join("a/f.txt")}},
            ],
        });
        if let Some(m) = mode {
            scenario["mode"] = json!(m);
        }
        let run = peer::run_host_within(&scenario, std::time::Duration::from_secs(120));
        let (steps, summary) = (run.steps, run.summary);
        assert_eq!(summary["sent"], summary["answered"], "{summary}");
        // The session went on, and no question reached the host's model.
        assert_eq!(steps[1]["text"], "written", "{steps:?}");
        let read: Value = serde_json::from_str(steps[2]["text"].as_str().unwrap()).unwrap();
        assert_eq!(read["text"], "in a", "{read}");
        assert_eq!(summary["sampling_calls"], 0, "{summary}");
        let got = read_five_ways(&s.captured());
        let notes: Vec<&Value> = got
            .iter()
            .filter(|m| m["method"] == "notifications/message")
            .map(|m| &m["params"]["data"])
            .collect();
        // Only the one line that could be read, and meant one thing.
        assert_eq!(notes, [&json!("cr")], "{got:?}");
        assert!(
            got.iter().all(|m| m["method"] != "sampling/createMessage"),
            "{got:?}"
        );
    }
}

#[test]
fn a_server_cannot_keep_a_revoked_root_by_cancelling_rootfences_roots_list() {
    for mode in [None, Some("legacy")] {
        let s = Setup::new();
        let b_file = s.base().join("b/f.txt");
        let mut scenario = json!({
            "command": s.command(),
            "roots": [[s.uri("a"), "a"], [s.uri("b"), "b"]],
            "steps": [
                {"call": "read", "args": {"path": b_file}},
                {"call": "spray_cancels", "args": {"up_to": 40, "seconds": 4.0}},
                {"roots": [[s.uri("a"), "a"]]},
                {"call": "read", "args": {"path": b_file}},
                {"call": "read", "args": {"path": s.base().join("a/f.txt")}},
            ],
        });
        if let Some(m) = mode {
            scenario["mode"] = json!(m);
        }
        let run = peer::run_host_within(&scenario, std::time::Duration::from_secs(120));
        let (steps, summary) = (run.steps, run.summary);
        assert_eq!(summary["sent"], summary["answered"], "{summary}");
        let read = |i: usize| -> Value {
            serde_json::from_str(steps[i]["text"].as_str().unwrap()).unwrap()
        };
        assert_eq!(read(1)["text"], "in b", "{steps:?}");
        assert_eq!(read(4)["ok"], false, "B was revoked, yet: {}", read(4));
        assert_eq!(read(5)["text"], "in a");
        let got = read_five_ways(&s.captured());
        assert!(
            got.iter().all(|m| m["method"] != "notifications/cancelled"),
            "a cancellation reached the host"
        );
    }
}
