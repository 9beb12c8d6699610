//! A server that fails under the sandbox says so in its own words on its
//! stderr (`cat: /x: Permission denied`); `rootfence run` reads those
//! lines, and the error the host gets for its request names the sandbox
//! denial and the policy rule that would allow the path. Where the same
//! program fails for another reason, nothing is said about the sandbox.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};

use common::{Tree, rootfence};
use serde_json::Value;

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

/// Run `script` (sh) as the server under `rootfence run --root r --ro-root
/// ro`, send `initialize`, and return the host's answer and rootfence's
/// stderr.
fn initialize_through(t: &Tree, script: &str) -> (Value, String) {
    let mut args = vec![
        "run".to_string(),
        "--no-watch".into(),
        "--root".into(),
        t.r.display().to_string(),
        "--ro-root".into(),
        t.ro.display().to_string(),
    ];
    if !t.namespaces {
        args.push("--policy".into());
        args.push(t.policy("no-ns.toml", "version = 1\n"));
    }
    let mut child = Command::new(rootfence())
        .args(&args)
        .args(["--", "/bin/sh", "-c", script])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", &t.home)
        .env("RUST_LOG", "warn")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    writeln!(stdin, "{INITIALIZE}").unwrap();
    stdin.flush().unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    drop(stdin);
    let _ = child.wait();
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let answer = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}\n{err}"));
    (answer, err)
}

fn error_message(v: &Value) -> String {
    v["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("expected an error: {v}"))
        .to_string()
}

fn a_denied_read_is_named_in_the_hosts_error(t: &Tree) {
    let secret = t.outside.join("secret");
    let (answer, err) = initialize_through(t, &format!("cat '{}'; exit 3", secret.display()));
    let msg = error_message(&answer);
    assert!(msg.contains("exit code 3"), "{msg}");
    assert!(msg.contains(&secret.display().to_string()), "{msg}");
    assert!(
        msg.contains(&format!("[runtime] read = [\"{}\"]", secret.display())),
        "{msg}"
    );
    assert!(msg.contains("sandbox"), "{msg}");
    assert!(err.contains("sandbox denial:"), "{err}");
    // The server's own line reached rootfence's stderr too.
    assert!(err.contains("cat: "), "{err}");
}

#[test]
fn a_denied_read_is_named_in_the_hosts_error_with_namespaces() {
    a_denied_read_is_named_in_the_hosts_error(&Tree::new());
}

#[test]
fn a_denied_read_is_named_in_the_hosts_error_without_namespaces() {
    a_denied_read_is_named_in_the_hosts_error(&Tree::without_namespaces());
}

/// A path under the home directory is named as `~/…` in the rule.
#[test]
fn a_denied_path_in_home_is_named_from_home() {
    let t = Tree::new();
    let key = t.home.join(".ssh/id_rsa");
    let (answer, _) = initialize_through(&t, &format!("cat '{}'; exit 1", key.display()));
    let msg = error_message(&answer);
    assert!(
        msg.contains("[runtime] read = [\"~/.ssh/id_rsa\"]"),
        "{msg}"
    );
}

fn writing_a_read_only_root_names_the_write_rule(t: &Tree) {
    let target = t.ro.join("new.txt");
    let (answer, _) = initialize_through(t, &format!("echo x > '{}'; exit 4", target.display()));
    let msg = error_message(&answer);
    assert!(msg.contains("exit code 4"), "{msg}");
    assert!(msg.contains("granted read-only"), "{msg}");
    assert!(
        msg.contains(&format!("[runtime] write = [\"{}\"]", target.display())),
        "{msg}"
    );
    assert!(!target.exists(), "the write was refused");
}

#[test]
fn writing_a_read_only_root_names_the_write_rule_with_namespaces() {
    writing_a_read_only_root_names_the_write_rule(&Tree::new());
}

#[test]
fn writing_a_read_only_root_names_the_write_rule_without_namespaces() {
    writing_a_read_only_root_names_the_write_rule(&Tree::without_namespaces());
}

/// The same failures where the sandbox is not the cause: a file in the
/// root that does not exist, and a file the server may read (it is read,
/// then the server fails on its own). No word of the sandbox.
#[test]
fn failures_the_sandbox_did_not_cause_say_nothing_of_it() {
    let t = Tree::new();
    let missing = t.r.join("missing.txt");
    let (answer, err) = initialize_through(&t, &format!("cat '{}'; exit 5", missing.display()));
    let msg = error_message(&answer);
    assert!(msg.contains("exit code 5"), "{msg}");
    assert!(!msg.contains("sandbox"), "{msg}");
    assert!(!err.contains("sandbox denial"), "{err}");

    let inside = t.r.join("inside");
    let (answer, err) = initialize_through(
        &t,
        &format!(
            "cat '{}' >&2; echo 'Permission denied: remote API' >&2; exit 6",
            inside.display()
        ),
    );
    let msg = error_message(&answer);
    assert!(msg.contains("exit code 6"), "{msg}");
    assert!(!msg.contains("sandbox"), "{msg}");
    // The allowed read worked: its content reached rootfence's stderr.
    assert!(err.contains("inside"), "{err}");
}
