//! `rootfence run` end to end, with real peers: the Python SDK's
//! `ClientSession` as the host (tests/peers/host.py) and the npm
//! `@modelcontextprotocol/server-filesystem` as the server, both installed
//! from the lockfiles in tests/peers by `tests/peers/install.sh` (which the
//! test command runs first).

use crate::peer;

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

fn uri(p: &Path) -> String {
    rootfence::roots::path_to_uri(p)
}

struct Fx {
    _dir: tempfile::TempDir,
    base: PathBuf,
    policy: PathBuf,
}

/// A tree with roots a, b, r, the sibling r_evil, an outside secret, a
/// symlink from r to it, and a policy whose ceiling is the tree.
fn fixture() -> Fx {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    for d in ["tree/a", "tree/b", "tree/r", "tree/r_evil", "tree/outside"] {
        std::fs::create_dir_all(base.join(d)).unwrap();
    }
    let t = base.join("tree");
    std::fs::write(t.join("a/f.txt"), "file in a").unwrap();
    std::fs::write(t.join("b/f.txt"), "file in b").unwrap();
    std::fs::write(t.join("r/inside.txt"), "inside r").unwrap();
    std::fs::write(t.join("r_evil/secret.txt"), "sibling secret").unwrap();
    std::fs::write(t.join("outside/secret.txt"), "outside secret").unwrap();
    std::os::unix::fs::symlink(t.join("outside/secret.txt"), t.join("r/link.txt")).unwrap();
    let policy = base.join("policy.toml");
    std::fs::write(
        &policy,
        format!(
            "[roots]\nallow_under = [\"{}\"]\n[runtime]\nprofile = \"node\"\n[limits]\nrebuild_debounce_ms = 20\n",
            t.display()
        ),
    )
    .unwrap();
    Fx {
        _dir: dir,
        base: t,
        policy,
    }
}

fn rootfence_run(policy: &Path, extra: &[&str], server: &[&str]) -> Vec<String> {
    let mut v = vec![
        env!("CARGO_BIN_EXE_rootfence").to_string(),
        "run".into(),
        "--policy".into(),
        policy.display().to_string(),
    ];
    v.extend(extra.iter().map(|s| s.to_string()));
    v.push("--".into());
    v.extend(server.iter().map(|s| s.to_string()));
    v
}

fn find<'a>(steps: &'a [Value], key: &str, name: &str, nth: usize) -> &'a Value {
    steps
        .iter()
        .filter(|s| s[key] == name)
        .nth(nth)
        .unwrap_or_else(|| panic!("no {key}={name} #{nth} in {steps:?}"))
}

#[test]
fn filesystem_server_sees_exactly_the_enforced_roots_and_follows_changes() {
    let fx = fixture();
    let node = peer::node().display().to_string();
    let js = peer::server_js("@modelcontextprotocol/server-filesystem")
        .display()
        .to_string();
    let a = fx.base.join("a");
    let b = fx.base.join("b");
    let (steps, summary) = peer::run_host(&json!({
        "command": rootfence_run(&fx.policy, &[], &[&node, &js]),
        "roots": [[uri(&a), "A"], ["file:///usr/share", "outside the ceiling"]],
        "steps": [
            {"wait_for": "list_allowed_directories", "args": {}, "contains": a.display().to_string()},
            {"call": "read_text_file", "args": {"path": a.join("f.txt")}},
            {"call": "read_text_file", "args": {"path": b.join("f.txt")}},
            {"call": "read_text_file", "args": {"path": "/usr/share/dict/words"}},
            {"roots": [[uri(&b), "B"]]},
            {"wait_for": "list_allowed_directories", "args": {}, "contains": b.display().to_string()},
            {"call": "read_text_file", "args": {"path": b.join("f.txt")}},
            {"call": "read_text_file", "args": {"path": a.join("f.txt")}},
        ]
    }));
    let listed = find(&steps, "wait_for", "list_allowed_directories", 0);
    assert_eq!(listed["found"], true, "{steps:?}");
    let text = listed["text"].as_str().unwrap();
    assert!(
        text.contains(&a.display().to_string()) && !text.contains("/usr/share"),
        "{text}"
    );
    let r0 = find(&steps, "call", "read_text_file", 0);
    assert_eq!(
        (r0["error"].clone(), r0["text"].clone()),
        (json!(false), json!("file in a")),
        "{r0}"
    );
    assert_eq!(find(&steps, "call", "read_text_file", 1)["error"], true);
    assert_eq!(find(&steps, "call", "read_text_file", 2)["error"], true);
    // After the change: b is readable, a is not.
    let listed = find(&steps, "wait_for", "list_allowed_directories", 1);
    assert_eq!(listed["found"], true, "{steps:?}");
    assert!(
        !listed["text"]
            .as_str()
            .unwrap()
            .contains(&format!("{}\n", a.display()))
    );
    let r3 = find(&steps, "call", "read_text_file", 3);
    assert_eq!(
        (r3["error"].clone(), r3["text"].clone()),
        (json!(false), json!("file in b")),
        "{r3}"
    );
    assert_eq!(find(&steps, "call", "read_text_file", 4)["error"], true);
    // Every request got exactly one response; the host was asked for roots
    // at start and after the change.
    assert_eq!(summary["sent"], summary["answered"]);
    assert!(summary["roots_calls"].as_u64().unwrap() >= 2, "{summary}");
}

/// The filesystem server 2025.3.28 has the known containment bugs: a
/// sibling directory sharing the root's prefix passes its check, and so
/// does a symlink inside the root pointing out. Unconfined it leaks both;
/// under rootfence the sandbox refuses them.
#[test]
fn old_filesystem_server_bugs_are_contained_by_the_sandbox() {
    let fx = fixture();
    let node = peer::node().display().to_string();
    let js = peer::server_js("server-filesystem-2025-3-28")
        .display()
        .to_string();
    let r = fx.base.join("r");
    let r_str = r.display().to_string();
    let steps_for = |cmd: Vec<String>| {
        json!({
            "command": cmd,
            "roots": null,
            "steps": [
                {"call": "read_file", "args": {"path": r.join("inside.txt")}},
                {"call": "read_file", "args": {"path": fx.base.join("r_evil/secret.txt")}},
                {"call": "read_file", "args": {"path": r.join("link.txt")}},
            ]
        })
    };
    // Unconfined: the bug is real, the sibling's secret leaks.
    let (bare, _) = peer::run_host(&steps_for(vec![node.clone(), js.clone(), r_str.clone()]));
    let leak = find(&bare, "call", "read_file", 1);
    assert_eq!(
        (leak["error"].clone(), leak["text"].clone()),
        (json!(false), json!("sibling secret")),
        "{bare:?}"
    );
    // Through rootfence: the root works, neither escape does.
    let (fenced, summary) = peer::run_host(&steps_for(rootfence_run(
        &fx.policy,
        &["--root", &r_str],
        &[&node, &js, &r_str],
    )));
    let inside = find(&fenced, "call", "read_file", 0);
    assert_eq!(
        (inside["error"].clone(), inside["text"].clone()),
        (json!(false), json!("inside r")),
        "{fenced:?}"
    );
    for (i, what) in [(1, "sibling prefix"), (2, "symlink out")] {
        let step = find(&fenced, "call", "read_file", i);
        assert_eq!(step["error"], true, "{what}: {step}");
        let text = step["text"].as_str().unwrap();
        assert!(
            !text.contains("sibling secret") && !text.contains("outside secret"),
            "{what} leaked: {text}"
        );
        // Refused by the kernel, not by the server's own path check (which
        // the old release passes): Landlock's EACCES, or in the server's own
        // view, where nothing outside its roots exists, ENOENT (which the
        // server reports as a missing file or parent directory).
        assert!(
            text.contains("EACCES") || text.contains("ENOENT") || text.contains("does not exist"),
            "{what}: {text}"
        );
    }
    assert_eq!(summary["sent"], summary["answered"]);
}
