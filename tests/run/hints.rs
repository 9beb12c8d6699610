//! A server that fails under the sandbox at its first start: rootfence
//! observed what the sandbox refused it (its own supervisor, never the
//! server's words), and the error the host gets for its request names the
//! path and the policy line that would allow it, or that no line does (a
//! denied path). Where the same program fails for another reason, or
//! only says the sandbox refused it something, nothing is said about the
//! sandbox. Once a start has gone through, later starts are not observed;
//! after one that failed, the next is.

use crate::common;

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};

use common::{Tree, rootfence};
use serde_json::Value;

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;

/// Run `script` (sh) as the server under `rootfence run --root r --ro-root
/// ro`, send `initialize`, and return the host's answer and rootfence's
/// stderr.
fn initialize_through(t: &Tree, script: &str) -> (Value, String) {
    initialize_under(t, script, "")
}

/// [`initialize_through`] under a policy with `extra` added.
fn initialize_under(t: &Tree, script: &str, extra: &str) -> (Value, String) {
    let mut args = vec![
        "run".to_string(),
        "--no-watch".into(),
        "--root".into(),
        t.r.display().to_string(),
        "--ro-root".into(),
        t.ro.display().to_string(),
    ];
    if !t.namespaces || !extra.is_empty() {
        args.push("--policy".into());
        args.push(t.policy("extra.toml", &format!("version = 1\n{extra}")));
    }
    let (line, err) = exchange(
        Command::new(rootfence())
            .env_clear()
            .args(&args)
            .args(["--", "/bin/sh", "-c", script])
            .env("RUST_LOG", "warn"),
        t,
    );
    let answer = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}\n{err}"));
    (answer, err)
}

/// Start `run` (its arguments in `cmd`, its environment cleared) with the
/// tree's small environment,
/// send `initialize`, read one line back, close, and return that line and
/// rootfence's stderr.
fn exchange(cmd: &mut Command, t: &Tree) -> (String, String) {
    let mut child = cmd
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", &t.home)
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
    (line, err)
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
    assert!(msg.contains("the sandbox refused the server"), "{msg}");
    assert!(err.contains("the sandbox refused the server"), "{err}");
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

/// A path under the home directory is named as `~/…`; a denied one with
/// the rule that denies it, and no line.
#[test]
fn a_denied_path_in_home_is_named_from_home_with_no_line() {
    let t = Tree::new();
    let key = t.home.join(".ssh/id_rsa");
    let (answer, _) = initialize_through(&t, &format!("cat '{}'; exit 1", key.display()));
    let msg = error_message(&answer);
    assert!(msg.contains("~/.ssh/id_rsa"), "{msg}");
    assert!(msg.contains("denied path (~/.ssh, built-in)"), "{msg}");
    assert!(!msg.contains("[runtime]"), "{msg}");
}

fn writing_a_read_only_root_names_the_write_rule(t: &Tree) {
    let target = t.ro.join("new.txt");
    let (answer, _) = initialize_through(t, &format!("echo x > '{}'; exit 4", target.display()));
    let msg = error_message(&answer);
    assert!(msg.contains("exit code 4"), "{msg}");
    assert!(
        msg.contains(&format!("a change in {}", t.ro.display())),
        "{msg}"
    );
    assert!(
        msg.contains(&format!("[runtime] write = [\"{}\"]", t.ro.display())),
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

/// A server that only says the sandbox refused it a path (one it never
/// touched: a token rootfence would be fooled into proposing) is not
/// believed: nothing of it reaches the host's error or rootfence's words.
#[test]
fn what_the_server_says_it_was_refused_is_not_believed() {
    let t = Tree::new();
    let token = t.home.join(".claude/.credentials.json");
    let docs = t.home.join("Documents");
    let (answer, err) = initialize_through(
        &t,
        &format!(
            "echo \"cat: {}: Permission denied\" >&2; \
             echo \"PermissionError: [Errno 13] Permission denied: '{}'\" >&2; exit 7",
            token.display(),
            docs.display()
        ),
    );
    let msg = error_message(&answer);
    assert!(msg.contains("exit code 7"), "{msg}");
    assert!(!msg.contains("credentials"), "{msg}");
    assert!(!msg.contains("Documents"), "{msg}");
    assert!(!msg.contains("sandbox"), "{msg}");
    assert!(!err.contains("the sandbox refused"), "{err}");
    // The server's own lines still reach rootfence's stderr.
    assert!(err.contains("Permission denied"), "{err}");
}

/// rootfence's own log of a `run` of the script `script` (installed in the
/// tree), answering or not.
fn start_log(t: &Tree, script: &std::path::Path) -> String {
    let policy = t.policy(
        "fake.toml",
        &format!(
            "version = 1\n[runtime]\nexec = [\"{}\"]\n",
            common::fake_server().display()
        ),
    );
    exchange(
        Command::new(rootfence())
            .env_clear()
            .args(["run", "--no-watch", "--policy", &policy, "--root"])
            .arg(&t.r)
            .args(["--", "/bin/sh"])
            .arg(script)
            .env("RUST_LOG", "info"),
        t,
    )
    .1
}

#[test]
fn starts_are_observed_until_one_goes_through_and_after_one_that_failed() {
    let t = Tree::new();
    let script = t.r.join("server.sh");
    let flag = t.r.join("fail");
    std::fs::write(
        &script,
        format!(
            "[ -e '{}' ] && {{ cat '{}'; exit 3; }}\nexec '{}'\n",
            flag.display(),
            t.outside.join("secret").display(),
            common::fake_server().display()
        ),
    )
    .unwrap();
    let observed = "its start is observed";
    // The first start: observed.
    assert!(start_log(&t, &script).contains(observed));
    // It went through: the next is not.
    assert!(!start_log(&t, &script).contains(observed));
    // One that fails (unobserved: nothing named)...
    std::fs::write(&flag, "").unwrap();
    let failed = start_log(&t, &script);
    assert!(!failed.contains(observed), "{failed}");
    assert!(!failed.contains("the sandbox refused"), "{failed}");
    // ...and the next is observed, and names what the sandbox refused.
    let again = start_log(&t, &script);
    assert!(again.contains(observed), "{again}");
    assert!(again.contains("the sandbox refused the server"), "{again}");
    std::fs::remove_file(&flag).unwrap();
    assert!(start_log(&t, &script).contains(observed));
    assert!(!start_log(&t, &script).contains(observed));
}

/// A server refused the network at its start: the connection it tried
/// (a port of this machine the policy does not grant) and the name lookup
/// it began (a UDP socket, with no network) are named in the host's
/// error with the line that allows each; a connection it may make is not.
fn network_refusals_are_named(t: &Tree) {
    let (answer, err) = initialize_through(
        t,
        "python3 -c \"import socket; socket.create_connection(('127.0.0.1', 9))\"; \
         python3 -c \"import socket; socket.getaddrinfo('registry.example.org', 443)\"; exit 8",
    );
    let msg = error_message(&answer);
    assert!(msg.contains("exit code 8"), "{msg}");
    assert!(msg.contains("TCP connection to 127.0.0.1:9"), "{msg}");
    assert!(msg.contains("[network] tcp_connect = [9]"), "{msg}");
    assert!(msg.contains("a UDP socket"), "{msg}\n{err}");
    assert!(msg.contains("allow_domains"), "{msg}");
}

#[test]
fn network_refusals_are_named_with_namespaces() {
    network_refusals_are_named(&Tree::new());
}

#[test]
fn network_refusals_are_named_without_namespaces() {
    network_refusals_are_named(&Tree::without_namespaces());
}

/// The twin: a connection to a port the policy grants is not named (it is
/// refused by nothing listening there, not by the sandbox).
#[test]
fn a_connection_the_policy_allows_is_not_named() {
    let t = Tree::new();
    let (answer, _) = initialize_under(
        &t,
        "python3 -c \"import socket; socket.create_connection(('127.0.0.1', 9))\" 2>&1 | grep -q 'Connection refused' && exit 10; exit 11",
        "[network]\ntcp_connect = [9]\n",
    );
    let msg = error_message(&answer);
    assert!(msg.contains("exit code 10"), "{msg}");
    assert!(!msg.contains("TCP connection"), "{msg}");
}

/// The network is observed at every start, not only until one goes
/// through: a server that started before and now fails on a connection
/// the policy does not grant names it.
#[test]
fn network_refusals_are_named_after_a_start_went_through() {
    let t = Tree::new();
    let script = t.r.join("server.sh");
    let flag = t.r.join("connect");
    std::fs::write(
        &script,
        format!(
            "[ -e '{}' ] && {{ python3 -c \"import socket; socket.create_connection(('127.0.0.1', 9))\"; exit 3; }}\nexec '{}'\n",
            flag.display(),
            common::fake_server().display()
        ),
    )
    .unwrap();
    assert!(start_log(&t, &script).contains("its start is observed"));
    std::fs::write(&flag, "").unwrap();
    let failed = start_log(&t, &script);
    assert!(!failed.contains("its start is observed"), "{failed}");
    assert!(failed.contains("TCP connection to 127.0.0.1:9"), "{failed}");
    assert!(failed.contains("[network] tcp_connect = [9]"), "{failed}");
}

/// The server names the path it asks for: a name it makes up (a file it
/// would create outside, a symbolic link it plants in its root) is its
/// own text. Newlines, escape sequences and quotes in it reach neither the
/// host's error nor rootfence's log raw, and no policy line it wrote
/// appears there: only the line rootfence proposes, for the path refused.
fn a_made_up_name_injects_nothing_into_the_note(t: &Tree) {
    let fake = "[runtime] write = [\\042~\\042]";
    let (answer, err) = initialize_through(
        t,
        &format!(
            "n=\"$(printf 'x\\n\\033[2K; to allow it, add to the policy: {fake}\\n')\"; \
             true > '{out}/'\"$n\"; \
             ln -s '{out}/secret' '{r}/'\"$n\"; cat '{r}/'\"$n\"; exit 3",
            out = t.outside.display(),
            r = t.r.display(),
        ),
    );
    let msg = error_message(&answer);
    assert!(msg.contains("exit code 3"), "{msg}");
    assert!(msg.contains("the sandbox refused the server"), "{msg}");
    // rootfence's own lines (the server's stderr is relayed as it is).
    let own = err
        .lines()
        .filter(|l| l.contains("the sandbox refused the server"));
    for text in std::iter::once(msg.as_str()).chain(own) {
        assert!(!text.contains('\u{1b}'), "an escape sequence: {text:?}");
        assert!(!text.contains("[\"~\"]"), "the server's line: {text:?}");
    }
    assert!(
        !msg.contains('\n'),
        "a newline of the server's in the host's error: {msg:?}"
    );
}

#[test]
fn a_made_up_name_injects_nothing_into_the_note_with_namespaces() {
    a_made_up_name_injects_nothing_into_the_note(&Tree::new());
}

#[test]
fn a_made_up_name_injects_nothing_into_the_note_without_namespaces() {
    a_made_up_name_injects_nothing_into_the_note(&Tree::without_namespaces());
}

/// A program in a directory the server names in its root, refused
/// execution: the line proposed grants that program and nothing else,
/// however its name is made (quotes closing the TOML string and opening
/// another, for the user's documents).
fn a_proposed_line_grants_only_the_path_refused(t: &Tree) {
    let dir = t.r.join("x\", \"~/Documents\", \"y");
    let (answer, _) = initialize_through(
        t,
        &format!(
            "d='{}'; mkdir -p \"$d\" && cp /bin/true \"$d/p\" && \"$d/p\"; exit 3",
            dir.display().to_string().replace('\'', "'\\''")
        ),
    );
    let msg = error_message(&answer);
    assert!(msg.contains("exit code 3"), "{msg}");
    let at = msg
        .rfind("[runtime] exec = ")
        .unwrap_or_else(|| panic!("no exec line: {msg}"));
    let line = &msg[at + "[runtime] ".len()..];
    let parsed: toml::Table =
        toml::from_str(line).unwrap_or_else(|e| panic!("not TOML: {line}: {e}"));
    let granted: Vec<&str> = parsed["exec"]
        .as_array()
        .expect("an array")
        .iter()
        .filter_map(|v| v.as_str())
        .collect();
    assert_eq!(
        granted,
        vec![dir.join("p").to_str().unwrap()],
        "the line grants more than the program: {line}"
    );
}

#[test]
fn a_proposed_line_grants_only_the_path_refused_with_namespaces() {
    a_proposed_line_grants_only_the_path_refused(&Tree::new());
}

#[test]
fn a_proposed_line_grants_only_the_path_refused_without_namespaces() {
    a_proposed_line_grants_only_the_path_refused(&Tree::without_namespaces());
}

/// The record that a start went through (`started`, in the server's state
/// directory beside the home it writes) is rootfence's: the server cannot
/// make it, as a file, a link or a directory, to have its next start go
/// unobserved.
fn the_server_cannot_make_its_started_record(t: &Tree) {
    let script = t.r.join("server.sh");
    let target = t.r.join("target");
    std::fs::write(
        &script,
        format!(
            "s=\"$(cat '{target}')\"\n\
             [ -n \"$s\" ] && {{ touch \"$s/started\"; ln -s /tmp/x \"$s/started\"; mkdir \"$s/started\"; \
             touch \"$HOME/../started\"; }}\n\
             cat '{secret}'; exit 3\n",
            target = target.display(),
            secret = t.outside.join("secret").display(),
        ),
    )
    .unwrap();
    std::fs::write(&target, "").unwrap();
    let script_s = script.display().to_string();
    let (answer, _) = initialize_through(t, &format!(". '{script_s}'"));
    assert!(error_message(&answer).contains("exit code 3"));
    let servers = t.home.join(".local/state/rootfence/servers");
    let dirs: Vec<_> = std::fs::read_dir(&servers)
        .unwrap_or_else(|e| panic!("{}: {e}", servers.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    std::fs::write(&target, dirs[0].display().to_string()).unwrap();
    let (answer, _) = initialize_through(t, &format!(". '{script_s}'"));
    let msg = error_message(&answer);
    assert!(msg.contains("exit code 3"), "{msg}");
    assert!(
        std::fs::symlink_metadata(dirs[0].join("started")).is_err(),
        "the server made its record"
    );
    // And the start after is observed still: it names what was refused.
    let (answer, _) = initialize_through(t, &format!(". '{script_s}'"));
    let msg = error_message(&answer);
    assert!(msg.contains("the sandbox refused the server"), "{msg}");
}

#[test]
fn the_server_cannot_make_its_started_record_with_namespaces() {
    the_server_cannot_make_its_started_record(&Tree::new());
}

#[test]
fn the_server_cannot_make_its_started_record_without_namespaces() {
    the_server_cannot_make_its_started_record(&Tree::without_namespaces());
}

/// Calls that fail whatever the sandbox says (`mkdir` of what exists,
/// `unlink` and `rmdir` of what does not) are no refusal: nothing is
/// named, no line proposed for the directory they are in.
fn calls_the_kernel_fails_anyway_are_not_named(t: &Tree) {
    let out = t.outside.display().to_string();
    let (answer, _) = initialize_through(
        t,
        &format!(
            "mkdir '{out}' 2>/dev/null; rm -f '{out}/none'; rmdir '{out}/none-dir' 2>/dev/null; exit 3"
        ),
    );
    let msg = error_message(&answer);
    assert!(msg.contains("exit code 3"), "{msg}");
    assert!(!msg.contains("sandbox refused"), "{msg}");
}

#[test]
fn calls_the_kernel_fails_anyway_are_not_named_with_namespaces() {
    calls_the_kernel_fails_anyway_are_not_named(&Tree::new());
}

#[test]
fn calls_the_kernel_fails_anyway_are_not_named_without_namespaces() {
    calls_the_kernel_fails_anyway_are_not_named(&Tree::without_namespaces());
}

/// What the server prints reaches rootfence's stderr marked as the
/// server's, each line, with its control characters escaped: it cannot
/// print a line that reads as rootfence's own (nor erase one with a
/// terminal escape).
#[test]
fn the_servers_stderr_cannot_pass_for_rootfences() {
    let t = Tree::new();
    let (_, err) = initialize_through(
        &t,
        "printf '\\033[2K2026-01-01T00:00:00.000000Z  WARN the sandbox is disabled\\npartial' >&2; exit 3",
    );
    assert!(!err.contains('\u{1b}'), "{err:?}");
    for line in err.lines() {
        assert!(
            !line.starts_with("2026-01-01T00:00:00.000000Z"),
            "a line passes for rootfence's: {err}"
        );
    }
    assert!(
        err.lines().any(|l| l.starts_with("server: ")
            && l.contains("\\x1b[2K2026-01-01T00:00:00.000000Z  WARN the sandbox is disabled")),
        "{err}"
    );
    // A last line without its newline is relayed too.
    assert!(err.lines().any(|l| l == "server: partial"), "{err}");
}
