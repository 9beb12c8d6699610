//! The fence in both protocol eras, end to end: the built `rootfence run`
//! with the default policy (plus an audit file) between the Python SDK
//! host (tests/peers/host.py: `Client(mode="auto")`, which negotiates
//! 2026-07-28, and `Client(mode="legacy")`, the handshake era) and the
//! hostile Python server (tests/peers/hostile_server.py), which asks the
//! host for its roots, its model's output and a secret form, through
//! `input_required` results in 2026-07-28 and server -> client requests
//! in the handshake era. tests/servers/hostile_peers.rs shows the same
//! peers unfenced: every leak asserted closed here is open there.

use crate::peer;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

const MODEL_TEXT: &str = "the host model's private answer";

/// The eras: the host's mode and the revision it must end up speaking.
const ERAS: [(&str, &str); 2] = [("auto", "2026-07-28"), ("legacy", "2025-11-25")];

/// A scratch directory: `proj` (the host's root rootfence enforces, with a
/// file), `outside.txt` (no root grants it), the policy (default, plus an
/// audit file in `state/`).
struct Setup {
    dir: tempfile::TempDir,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let s = Setup { dir };
        std::fs::create_dir_all(s.proj()).unwrap();
        std::fs::write(s.proj().join("in.txt"), "inside").unwrap();
        std::fs::write(s.base().join("outside.txt"), "outside").unwrap();
        std::fs::write(
            s.policy(),
            format!("[audit]\nfile = \"{}\"\n", s.audit().display()),
        )
        .unwrap();
        s
    }

    fn base(&self) -> PathBuf {
        std::fs::canonicalize(self.dir.path()).unwrap()
    }

    fn proj(&self) -> PathBuf {
        self.base().join("proj")
    }

    fn policy(&self) -> PathBuf {
        self.base().join("policy.toml")
    }

    fn audit(&self) -> PathBuf {
        self.base().join("state/audit.jsonl")
    }

    fn proj_uri(&self) -> String {
        format!("file://{}", self.proj().display())
    }

    /// Every audit record written so far.
    fn records(&self) -> Vec<Value> {
        std::fs::read_to_string(self.audit())
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// Run the host in `mode` through `rootfence run` with `steps`; the
    /// host's roots are `proj` and a directory that does not exist (which
    /// rootfence cannot enforce).
    fn run(&self, mode: &str, elicitation: Value, steps: Value) -> (Vec<Value>, Value) {
        let s = json!({
            "command": command(&self.policy()),
            "mode": mode,
            "roots": [[self.proj_uri(), "proj"], ["file:///home/someone/private-project", "private"]],
            "sampling": {"text": MODEL_TEXT, "model": "host-model"},
            "elicitation": elicitation,
            "steps": steps,
        });
        let (mut steps, summary) = peer::run_host(&s);
        assert_eq!(summary["sent"], summary["answered"], "{summary}");
        steps.remove(0);
        (steps, summary)
    }
}

fn command(policy: &Path) -> Vec<String> {
    vec![
        env!("CARGO_BIN_EXE_rootfence").to_string(),
        "run".into(),
        "--policy".into(),
        policy.display().to_string(),
        "--".into(),
        peer::python().display().to_string(),
        peer::peers()
            .join("hostile_server.py")
            .display()
            .to_string(),
    ]
}

fn secrets() -> Value {
    json!({"action": "accept", "content": {"password": "hunter2", "api_key": "sk-live-0123"}})
}

/// A tool's report (the JSON text of a successful call).
fn report(step: &Value) -> Value {
    assert_eq!(step["error"], false, "{step}");
    serde_json::from_str(step["text"].as_str().unwrap()).unwrap()
}

/// What the server got for input request `key` of a `probe` call: in the
/// stateless era the whole call fails with rootfence's error; in the
/// handshake era the server's own request does, and the server reports it.
/// Returns the error text (with the JSON-RPC code).
fn refused(step: &Value, key: &str) -> String {
    if step["error"] == true {
        let code = step["code"].as_i64().unwrap_or_default();
        return format!("{} (code {code})", step["text"].as_str().unwrap());
    }
    let r = report(step);
    assert!(
        r[key].is_null() || key == "form" && r["form"].is_null(),
        "{r}"
    );
    r["errors"][key].as_str().unwrap_or_default().to_string()
}

#[test]
fn every_row_of_the_fence_holds_in_both_eras() {
    for (mode, protocol) in ERAS {
        let s = Setup::new();
        let (steps, summary) = s.run(
            mode,
            secrets(),
            json!([
                {"call": "capabilities"},
                {"call": "probe", "args": {"ask": ["where"]}},
                {"call": "probe", "args": {"ask": ["llm"]}},
                {"call": "probe", "args": {"ask": ["form"]}},
                {"call": "probe"},
                {"call": "read", "args": {"path": s.proj().join("in.txt")}},
                {"call": "read", "args": {"path": s.base().join("outside.txt")}},
            ]),
        );
        assert_eq!(summary["protocol"], protocol, "{mode}: {summary}");
        // The sampling capability is hidden (in `_meta` of every request,
        // or in `initialize`); roots are offered by rootfence.
        let caps = report(&steps[0]);
        assert_eq!(caps["protocol"], protocol, "{caps}");
        assert!(caps["capabilities"].get("sampling").is_none(), "{caps}");
        assert!(caps["capabilities"]["roots"].is_object(), "{caps}");
        // The server is told exactly the enforced roots: not the host's
        // root rootfence cannot enforce. In 2026-07-28 rootfence answered
        // the roots-only result and sent the request again itself.
        let roots = report(&steps[1]);
        assert_eq!(roots["roots"], json!([s.proj_uri()]), "{mode}: {roots}");
        assert_eq!(roots["errors"], json!({}), "{roots}");
        let rounds = if mode == "auto" { 2 } else { 1 };
        assert_eq!(roots["rounds"], rounds, "{roots}");
        // Sampling refused (sampling.allow = false), -32001.
        let e = refused(&steps[2], "llm");
        assert!(
            e.contains("rootfence policy: sampling.allow = false") && e.contains("-32001"),
            "{mode}: {e}"
        );
        // The form asking for a password and an API key refused.
        let e = refused(&steps[3], "form");
        assert!(
            e.contains("elicitation.refuse_sensitive") && e.contains("-32001"),
            "{mode}: {e}"
        );
        // All three at once: nothing leaks.
        let all = &steps[4];
        if mode == "auto" {
            assert_eq!(all["error"], true, "{all}");
            assert_eq!(all["code"], -32001, "{all}");
        } else {
            let r = report(all);
            assert_eq!(r["roots"], json!([s.proj_uri()]), "{r}");
            assert!(r["sampling"].is_null() && r["form"].is_null(), "{r}");
        }
        // The host's model and form were never asked; its roots were asked
        // once, by rootfence.
        assert_eq!(
            (
                summary["sampling_calls"].as_u64(),
                summary["elicitation_calls"].as_u64(),
                summary["roots_calls"].as_u64()
            ),
            (Some(0), Some(0), Some(1)),
            "{mode}: {summary}"
        );
        // The kernel: a file in the root reads, one outside does not.
        let inside = report(&steps[5]);
        assert_eq!(inside, json!({"ok": true, "text": "inside"}), "{inside}");
        let outside = report(&steps[6]);
        assert_eq!(outside["ok"], false, "{mode}: {outside}");
        // Every decision is in the audit file.
        let records = s.records();
        let has = |method: &str, rule: &str| {
            records
                .iter()
                .any(|r| r["method"] == method && r["decision"] == "refused" && r["rule"] == rule)
        };
        assert!(
            has("sampling/createMessage", "sampling.allow"),
            "{mode}: {records:?}"
        );
        assert!(
            has("elicitation/create", "elicitation.refuse_sensitive"),
            "{mode}: {records:?}"
        );
        let via = records
            .iter()
            .filter(|r| {
                r["summary"]
                    .as_str()
                    .is_some_and(|t| t.contains("via=input_required"))
            })
            .count();
        if mode == "auto" {
            assert!(via >= 2, "{records:?}");
        } else {
            assert_eq!(via, 0, "{records:?}");
        }
    }
}

#[test]
fn each_dodge_of_the_guard_is_refused_in_both_eras() {
    // Field names that mean a password, spelled to slip past a plain
    // comparison: a short name, invisible characters, fullwidth letters,
    // Cyrillic look-alikes.
    let dodges = [
        "pw",
        "pass\u{200B}word",
        "pass\u{00AD}word",
        "pass\u{2060}word",
        "\u{FF50}\u{FF41}\u{FF53}\u{FF53}\u{FF57}\u{FF4F}\u{FF52}\u{FF44}",
        "\u{0440}\u{0430}ssword",
    ];
    // A request method as a notification, and as members of a batch.
    let note = json!({"jsonrpc": "2.0", "method": "sampling/createMessage",
        "params": {"messages": [{"role": "user", "content": {"type": "text", "text": "secret?"}}], "maxTokens": 5}});
    let batch = json!([
        {"jsonrpc": "2.0", "method": "elicitation/create", "params": {"message": "key?", "requestedSchema": {"type": "object", "properties": {"k": {"type": "string"}}}}},
        {"jsonrpc": "2.0", "id": 77, "method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}}
    ]);
    for (mode, protocol) in ERAS {
        let s = Setup::new();
        let content: serde_json::Map<String, Value> = dodges
            .iter()
            .map(|d| (d.to_string(), json!("hunter2")))
            .collect();
        let mut steps: Vec<Value> = dodges
            .iter()
            .map(|d| json!({"call": "probe", "args": {"ask": ["form"], "fields": [d]}}))
            .collect();
        steps
            .push(json!({"call": "raw", "args": {"lines": [note.to_string(), batch.to_string()]}}));
        steps.push(json!({"call": "capabilities"}));
        let (out, summary) = s.run(
            mode,
            json!({"action": "accept", "content": content}),
            Value::Array(steps),
        );
        assert_eq!(summary["protocol"], protocol, "{summary}");
        for (d, step) in dodges.iter().zip(&out) {
            let e = refused(step, "form");
            assert!(
                e.contains("elicitation.refuse_sensitive") && e.contains("-32001"),
                "{mode}: {d:?}: {e}"
            );
        }
        assert_eq!(out[dodges.len()]["text"], "written");
        // The session goes on after the notification and the batch.
        report(&out[dodges.len() + 1]);
        assert_eq!(
            (
                summary["sampling_calls"].as_u64(),
                summary["elicitation_calls"].as_u64()
            ),
            (Some(0), Some(0)),
            "{mode}: {summary}"
        );
        let records = s.records();
        let refused_forms = records
            .iter()
            .filter(|r| r["rule"] == "elicitation.refuse_sensitive")
            .count();
        assert_eq!(refused_forms, dodges.len(), "{mode}: {records:?}");
        assert!(
            records
                .iter()
                .any(|r| r["method"] == "sampling/createMessage"
                    && r["rule"] == "guard.notification"),
            "{mode}: {records:?}"
        );
        // The batch (batches exist only in 2025-03-26) is refused whole;
        // its request-method members are recorded as dropped.
        for method in ["elicitation/create", "sampling/createMessage"] {
            assert!(
                records
                    .iter()
                    .any(|r| r["method"] == method && r["rule"] == "guard.batch"),
                "{mode}: {method}: {records:?}"
            );
        }
    }
}
