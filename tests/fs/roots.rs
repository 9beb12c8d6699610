//! A real host (the Python SDK, tests/peers/host.py) that declares roots
//! and changes them, talking to `rootfence fs` directly and through
//! `rootfence run` (no command): the host's roots replace the command
//! line's, and after a change the old root is refused at once, by the
//! next call.

use crate::fs_support;

use fs_support::peer;
use serde_json::{Value, json};

struct Dirs {
    _tmp: tempfile::TempDir,
    base: std::path::PathBuf,
    policy: std::path::PathBuf,
}

fn dirs() -> Dirs {
    let tmp = tempfile::Builder::new()
        .prefix("rootfence-fs-roots-")
        .tempdir()
        .expect("tempdir");
    let base = std::fs::canonicalize(tmp.path()).expect("canonical");
    for d in ["a", "b", "cli"] {
        std::fs::create_dir_all(base.join(d)).expect("mkdir");
        std::fs::write(base.join(d).join("f.txt"), format!("file in {d}")).expect("write");
    }
    let policy = base.join("policy.toml");
    std::fs::write(
        &policy,
        format!("[roots]\nallow_under = [\"{}\"]\n", base.display()),
    )
    .expect("write");
    Dirs {
        _tmp: tmp,
        base,
        policy,
    }
}

fn uri(p: &std::path::Path) -> String {
    format!("file://{}", p.display())
}

/// The scenario: read in a, switch the roots to b, read in a (refused at
/// once) and in b, list the roots.
fn scenario(d: &Dirs, command: Vec<String>, mode: Option<&str>) -> Value {
    let (a, b) = (d.base.join("a"), d.base.join("b"));
    let mut s = json!({
        "command": command,
        "roots": [[uri(&a), "a"]],
        "steps": [
            {"call": "read_text_file", "args": {"path": a.join("f.txt")}},
            {"call": "read_text_file", "args": {"path": d.base.join("cli/f.txt")}},
            {"roots": [[uri(&b), "b"]]},
            {"call": "read_text_file", "args": {"path": a.join("f.txt")}},
            {"call": "read_text_file", "args": {"path": b.join("f.txt")}},
            {"call": "list_allowed_directories"},
        ]
    });
    if let Some(m) = mode {
        s["mode"] = json!(m);
    }
    s
}

fn calls(steps: &[Value]) -> Vec<(bool, String)> {
    steps
        .iter()
        .filter(|s| s.get("call").is_some())
        .map(|s| {
            (
                s["error"].as_bool().unwrap_or(true),
                s["text"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect()
}

fn check(d: &Dirs, steps: &[Value]) {
    let c = calls(steps);
    assert_eq!(c.len(), 5, "{steps:?}");
    assert_eq!(c[0], (false, "file in a".to_string()), "{steps:?}");
    // The command line's root was replaced by the host's.
    assert!(c[1].0 && !c[1].1.contains("file in cli"), "{steps:?}");
    // After the change: the old root refused by the very next call, the
    // new one served.
    assert!(c[2].0 && c[2].1.contains("Access denied"), "{steps:?}");
    assert_eq!(c[3], (false, "file in b".to_string()), "{steps:?}");
    let listed = &c[4].1;
    assert!(
        listed.contains(&d.base.join("b").display().to_string())
            && !listed.contains(&d.base.join("a").display().to_string()),
        "{listed}"
    );
}

#[test]
fn host_roots_replace_and_change_at_once() {
    let d = dirs();
    let cmd = vec![
        fs_support::rootfence(),
        "fs".into(),
        "--root".into(),
        d.base.join("cli").display().to_string(),
    ];
    let (steps, summary) = peer::run_host(&scenario(&d, cmd, None));
    check(&d, &steps);
    assert_eq!(summary["sent"], summary["answered"], "{summary}");
    assert!(
        summary["roots_calls"].as_u64().unwrap_or(0) >= 2,
        "{summary}"
    );
}

#[test]
fn host_roots_through_rootfence_run() {
    let d = dirs();
    let cmd = vec![
        fs_support::rootfence(),
        "run".into(),
        "--no-watch".into(),
        "--policy".into(),
        d.policy.display().to_string(),
        "--root".into(),
        d.base.join("cli").display().to_string(),
        "--no-host-roots".into(),
    ];
    // With --no-host-roots the enforced roots are the command line's: the
    // host's are not served, inside the server or by the sandbox.
    let (steps, _) = peer::run_host(&scenario(&d, cmd, None));
    let c = calls(&steps);
    assert!(c[0].0, "{steps:?}");
    assert_eq!(c[1], (false, "file in cli".to_string()), "{steps:?}");

    // Without a command-line root, the host's roots are enforced; a change
    // relaunches the server with the new roots.
    let cmd = vec![
        fs_support::rootfence(),
        "run".into(),
        "--no-watch".into(),
        "--policy".into(),
        d.policy.display().to_string(),
    ];
    let mut s = scenario(&d, cmd, None);
    // No command-line root here: the second step reads outside every root.
    s["steps"][1] = json!({"call": "read_text_file", "args": {"path": d.base.join("cli/f.txt")}});
    let (steps, summary) = peer::run_host(&s);
    check(&d, &steps);
    assert_eq!(summary["sent"], summary["answered"], "{summary}");
}

#[test]
fn host_roots_in_the_stateless_revision() {
    let d = dirs();
    let cmd = vec![
        fs_support::rootfence(),
        "fs".into(),
        "--root".into(),
        d.base.join("cli").display().to_string(),
    ];
    let (steps, summary) = peer::run_host(&scenario(&d, cmd, Some("auto")));
    assert_eq!(summary["protocol"], "2026-07-28", "{summary}");
    check(&d, &steps);
}

/// Through `rootfence run` in 2026-07-28 the proxy learns the host's
/// roots from the host's first call and answers the server's roots
/// questions with them: the host's root is served, the command line's
/// replaced. (A later change of the host's roots is the proxy's to notice
/// in this revision; not checked here.)
#[test]
fn host_roots_in_the_stateless_revision_through_rootfence_run() {
    let d = dirs();
    let cmd = vec![
        fs_support::rootfence(),
        "run".into(),
        "--no-watch".into(),
        "--policy".into(),
        d.policy.display().to_string(),
    ];
    let mut s = scenario(&d, cmd, Some("auto"));
    s["steps"] = json!([
        {"call": "read_text_file", "args": {"path": d.base.join("a/f.txt")}},
        {"call": "read_text_file", "args": {"path": d.base.join("b/f.txt")}},
    ]);
    let (steps, summary) = peer::run_host(&s);
    assert_eq!(summary["protocol"], "2026-07-28", "{summary}");
    let c = calls(&steps);
    assert_eq!(c[0], (false, "file in a".to_string()), "{steps:?}");
    assert!(c[1].0 && c[1].1.contains("Access denied"), "{steps:?}");
}
