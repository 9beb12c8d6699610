//! The proxy's protocol behaviour, with a scripted host over in-memory
//! pipes and the scriptable fake server as the peer. These tests use an
//! unconfined launcher so that they exercise the relay alone; the sandboxed
//! end-to-end runs are in `tests/run/e2e.rs`.

use crate::host;

use std::path::{Path, PathBuf};
use std::time::Duration;

use host::Host;
use host::session::{Launches, Running, start_with};
use rootfence::policy::{KeyNote, Policy, PolicyError};
use rootfence::proxy::{Change, Ending};
use rootfence::roots::{Access, RootInput};
use serde_json::{Value, json};

struct Fx {
    _dir: tempfile::TempDir,
    base: PathBuf,
}

fn fixture() -> Fx {
    let dir = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(dir.path()).unwrap();
    for d in ["a", "b", "c", "outside", "home/.ssh"] {
        std::fs::create_dir_all(base.join(d)).unwrap();
    }
    Fx { _dir: dir, base }
}

impl Fx {
    /// The fixture's directory `name`.
    fn dir(&self, name: &str) -> PathBuf {
        self.base.join(name)
    }

    /// The host's roots: the fixture's directories `names`, as the host
    /// answers `roots/list`.
    fn roots(&self, names: &[&str]) -> Value {
        names
            .iter()
            .map(|n| json!({"uri": uri(&self.dir(n))}))
            .collect()
    }
}

fn uri(p: &Path) -> String {
    rootfence::roots::path_to_uri(p)
}

/// The protocol version the host speaks unless a test says otherwise.
const VERSION: &str = "2025-06-18";

/// A session with `policy_extra` in its policy and the fixture's
/// directories `cli` as command-line roots, its host through the
/// handshake of `version` without the roots capability.
async fn initialized(version: &str, policy_extra: &str, cli: &[&str]) -> (Fx, Running) {
    let fx = fixture();
    let cli: Vec<PathBuf> = cli.iter().map(|n| fx.dir(n)).collect();
    let cli: Vec<&Path> = cli.iter().map(PathBuf::as_path).collect();
    let mut r = start(&fx, policy_extra, &cli);
    r.host.initialize(version, false, &json!([])).await;
    (fx, r)
}

/// A session with `policy_extra` in its policy, its host through the
/// handshake with the roots capability, declaring the fixture's
/// directories `names`; those roots come back with it.
async fn with_host_roots(policy_extra: &str, names: &[&str]) -> (Fx, Running, Value) {
    let fx = fixture();
    let mut r = start(&fx, policy_extra, &[]);
    let roots = fx.roots(names);
    r.host.initialize(VERSION, true, &roots).await;
    (fx, r, roots)
}

/// How the session of `task` ended, within 10 s.
async fn ending<E: std::fmt::Debug>(task: tokio::task::JoinHandle<Result<Ending, E>>) -> Ending {
    tokio::time::timeout(Duration::from_secs(10), task)
        .await
        .expect("the session ended within 10 s")
        .unwrap()
        .unwrap()
}

fn start(fx: &Fx, policy_extra: &str, cli_roots: &[&Path]) -> Running {
    let mut limits = String::new();
    for (k, v) in [
        ("rebuild_debounce_ms", "50"),
        ("drain_timeout_ms", "2000"),
        ("shutdown_grace_ms", "300"),
        ("restart_backoff_ms", "50"),
    ] {
        if !policy_extra.contains(k) {
            limits.push_str(&format!("{k} = {v}\n"));
        }
    }
    let text = format!(
        "[roots]\nallow_under = [\"{}\"]\n[limits]\n{limits}{policy_extra}",
        fx.base.display()
    );
    let cli = cli_roots
        .iter()
        .map(|p| RootInput::command_line(p.to_str().unwrap(), Access::ReadWrite))
        .collect();
    // The fixture owns the tree; the session keeps an empty directory.
    start_with(
        &text,
        &fx.base.join("home"),
        &fx.base,
        cli,
        tempfile::tempdir().unwrap(),
    )
}

fn launches(log: &Launches) -> Vec<Vec<PathBuf>> {
    log.roots.lock().unwrap().clone()
}

fn roots_of(v: &Value) -> Vec<String> {
    let text = Host::text(v);
    let inner: Value = serde_json::from_str(&text).unwrap_or_else(|_| panic!("not JSON: {text}"));
    inner["roots"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["uri"].as_str().unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn handshake_declares_roots_and_server_roots_list_is_answered_by_rootfence() {
    let fx = fixture();
    let a = fx.dir("a");
    let mut r = start(&fx, "", &[&a]);
    let none = json!([]);
    // The host has no roots capability; the server is told roots anyway.
    let init = r.host.initialize(VERSION, false, &none).await;
    assert_eq!(init["result"]["serverInfo"]["name"], "fake");
    let ev = r.host.call(1, "events", json!({}), &none).await;
    assert!(Host::text(&ev).contains("initialize roots=true"), "{ev}");
    // The server's roots/list never reaches the host: rootfence answers it.
    let roots = r.host.call(2, "roots", json!({}), &none).await;
    assert_eq!(roots_of(&roots), vec![uri(&a)]);
    assert!(
        r.host
            .seen
            .iter()
            .all(|m| m.get("method") != Some(&json!("roots/list")))
    );
    assert_eq!(launches(&r.log).len(), 1);
    drop(r.host);
    let ending = r.task.await.unwrap().unwrap();
    assert!(matches!(ending, Ending::HostClosed), "{ending:?}");
}

#[tokio::test]
async fn host_roots_are_validated_and_enforced_with_a_rebuild() {
    let fx = fixture();
    let mut r = start(&fx, "", &[]);
    let host_roots = json!([
        {"uri": uri(&fx.dir("a")), "name": "A"},
        {"uri": "file:///usr/share", "name": "outside the ceiling"},
        {"uri": format!("{}/%2e%2e/x", uri(&fx.base)), "name": "traversal"},
        {"uri": uri(&fx.dir("home/.ssh")), "name": "denied"},
    ]);
    r.host.initialize(VERSION, true, &host_roots).await;
    let roots = r.host.call(1, "roots", json!({}), &host_roots).await;
    let text = Host::text(&roots);
    assert!(
        text.contains("\"name\":\"A\""),
        "host names are kept: {text}"
    );
    assert_eq!(roots_of(&roots), vec![uri(&fx.dir("a"))]);
    // First launch with no roots (static only), then the rebuild with A.
    let l = launches(&r.log);
    assert_eq!(l.len(), 2, "{l:?}");
    assert!(l[0].is_empty());
    assert_eq!(l[1], vec![fx.dir("a")]);
    // The refusals were reported to the host as logging warnings.
    let warnings: Vec<&Value> = r
        .host
        .seen
        .iter()
        .filter(|m| m["method"] == "notifications/message" && m["params"]["level"] == "warning")
        .collect();
    assert_eq!(warnings.len(), 3, "{:?}", r.host.seen);
    assert!(warnings.iter().any(|w| {
        w["params"]["data"]
            .as_str()
            .unwrap()
            .contains("outside the policy ceiling")
    }));
    assert!(warnings.iter().any(|w| {
        w["params"]["data"]
            .as_str()
            .unwrap()
            .contains("dot segments")
    }));
    assert!(warnings.iter().any(|w| {
        w["params"]["data"]
            .as_str()
            .unwrap()
            .contains("inside denied path ~/.ssh")
    }));
    // The new server was told its roots changed.
    let ev = r.host.call(2, "events", json!({}), &host_roots).await;
    assert!(
        Host::text(&ev).contains("notifications/roots/list_changed"),
        "{ev}"
    );
}

#[tokio::test]
async fn roots_growing_rebuilds_drains_in_flight_and_queues_new_requests() {
    let (fx, mut r, mut roots) = with_host_roots("", &["a"]).await;
    let pid1 = Host::text(&r.host.call(1, "pid", json!({}), &roots).await);
    // A slow request in flight on the old server.
    r.host.send_call(2, "sleep", json!({"ms": 400})).await;
    // The host adds a root: nothing is revoked, the old server drains.
    roots = fx.roots(&["a", "b"]);
    r.host.roots_changed().await;
    // A request sent during the rebuild goes to the new server.
    tokio::time::sleep(Duration::from_millis(20)).await;
    r.host.send_call(3, "pid", json!({})).await;
    let slow = r.host.response(json!(2), &roots).await;
    assert_eq!(
        Host::text(&slow),
        "slept",
        "the old server finished its request: {slow}"
    );
    let pid3 = Host::text(&r.host.response(json!(3), &roots).await);
    assert_ne!(pid1, pid3, "request 3 went to the rebuilt server");
    let listed = r.host.call(4, "roots", json!({}), &roots).await;
    assert_eq!(
        roots_of(&listed),
        vec![uri(&fx.dir("a")), uri(&fx.dir("b"))]
    );
    // Every request got exactly one response.
    assert!(
        r.host
            .seen
            .iter()
            .all(|m| m.get("result").is_none() && m.get("error").is_none()),
        "{:?}",
        r.host.seen
    );
}

#[tokio::test]
async fn a_revoked_root_kills_its_server_and_answers_its_requests_in_flight() {
    let (fx, mut r, mut roots) = with_host_roots("", &["a"]).await;
    let pid1: i32 = Host::text(&r.host.call(1, "pid", json!({}), &roots).await)
        .parse()
        .unwrap();
    r.host.send_call(2, "sleep", json!({"ms": 5000})).await;
    // A is revoked: its server is not drained but killed.
    roots = fx.roots(&["b"]);
    r.host.roots_changed().await;
    tokio::time::sleep(Duration::from_millis(20)).await;
    r.host.send_call(3, "pid", json!({})).await;
    let slow = r.host.response(json!(2), &roots).await;
    let msg = Host::error_message(&slow);
    assert!(msg.contains("rights were revoked"), "{slow}");
    assert!(msg.contains(&fx.dir("a").display().to_string()), "{slow}");
    let pid3: i32 = Host::text(&r.host.response(json!(3), &roots).await)
        .parse()
        .unwrap();
    assert_ne!(pid1, pid3);
    // The new server answered only after the old one was gone.
    assert!(!Path::new(&format!("/proc/{pid1}")).exists());
    let listed = r.host.call(4, "roots", json!({}), &roots).await;
    assert_eq!(roots_of(&listed), vec![uri(&fx.dir("b"))]);
}

#[tokio::test]
async fn requests_that_outlive_the_drain_timeout_get_an_error() {
    let (fx, mut r, mut roots) = with_host_roots("drain_timeout_ms = 200\n", &["a"]).await;
    r.host.call(1, "pid", json!({}), &roots).await;
    r.host.send_call(5, "sleep", json!({"ms": 5000})).await;
    // A root added: nothing revoked, so the old server drains.
    roots = fx.roots(&["a", "b"]);
    r.host.roots_changed().await;
    let resp = r.host.response(json!(5), &roots).await;
    assert!(
        Host::error_message(&resp).contains("restarted because its roots changed"),
        "{resp}"
    );
}

#[tokio::test]
async fn a_burst_of_changes_is_one_rebuild_and_a_rename_is_no_relaunch() {
    let fx = fixture();
    let mut r = start(&fx, "", &[]);
    let mut roots = json!([{"uri": uri(&fx.dir("a")), "name": "one"}]);
    r.host.initialize(VERSION, true, &roots).await;
    r.host.call(1, "pid", json!({}), &roots).await;
    assert_eq!(launches(&r.log).len(), 2);
    roots = json!([{"uri": uri(&fx.dir("c")), "name": "c"}]);
    for _ in 0..5 {
        r.host.roots_changed().await;
    }
    // Answer the roots/list requests and let the debounce fire.
    let listed = loop {
        let v = r.host.call(2, "roots", json!({}), &roots).await;
        if roots_of(&v) == vec![uri(&fx.dir("c"))] {
            break v;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(Host::text(&listed).contains("\"c\""));
    assert_eq!(launches(&r.log).len(), 3, "{:?}", launches(&r.log));
    // Same directory, new name: the server is told, nothing is relaunched.
    roots = json!([{"uri": uri(&fx.dir("c")), "name": "renamed"}]);
    r.host.roots_changed().await;
    let listed = loop {
        let v = r.host.call(3, "roots", json!({}), &roots).await;
        if Host::text(&v).contains("renamed") {
            break v;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(roots_of(&listed), vec![uri(&fx.dir("c"))]);
    assert_eq!(launches(&r.log).len(), 3);
}

#[tokio::test]
async fn rebuild_tells_the_host_when_the_tools_differ() {
    let (fx, mut r, mut roots) = with_host_roots("", &["a"]).await;
    r.host.request(1, "tools/list", json!({}), &roots).await;
    *r.log.tools.lock().unwrap() = "brand_new_tool".into();
    roots = fx.roots(&["b"]);
    r.host.roots_changed().await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if r.host
            .seen
            .iter()
            .any(|m| m["method"] == "notifications/tools/list_changed")
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no tools/list_changed: {:?}",
            r.host.seen
        );
        r.host.call(2, "pid", json!({}), &roots).await;
    }
}

#[tokio::test]
async fn server_requests_get_fresh_ids_and_spoofed_responses_go_nowhere() {
    // The fake server's `sample` tool sends sampling/createMessage, which
    // the default policy refuses.
    let (_fx, mut r) = initialized(VERSION, "[sampling]\nallow = true\n", &[]).await;
    let none = json!([]);
    let mut host_facing = Vec::new();
    // The fake server numbers its own requests from 1, and restarts from 1
    // after a crash: the ids the host sees never repeat.
    for (i, round) in [(10, "first"), (20, "second"), (30, "after restart")] {
        if round == "after restart" {
            r.host.call(25, "crash", json!({}), &none).await;
        }
        r.host.send_call(i, "sample", json!({})).await;
        let req = loop {
            let m = r.host.recv().await;
            if m["method"] == "sampling/createMessage" {
                break m;
            }
            r.host.seen.push(m);
        };
        let id = req["id"].clone();
        assert!(!host_facing.contains(&id), "{round}: id {id} reused");
        host_facing.push(id.clone());
        // A response to an id nobody asked: dropped, not forwarded.
        r.host
            .send(json!({"jsonrpc":"2.0","id":424242,"result":{}}))
            .await;
        r.host
            .send(json!({"jsonrpc":"2.0","id":id,"result":{"role":"assistant","content":{"type":"text","text":round},"model":"m"}}))
            .await;
        let done = r.host.response(json!(i), &none).await;
        assert!(
            Host::text(&done).contains(round),
            "{round}: the server got the host's answer under its own id: {done}"
        );
        // A second answer to the same id is no longer routed anywhere.
        r.host
            .send(json!({"jsonrpc":"2.0","id":id,"result":{}}))
            .await;
    }
    let ev = r.host.call(40, "events", json!({}), &none).await;
    assert!(!Host::text(&ev).contains("unexpected response"), "{ev}");
}

#[tokio::test]
async fn a_crash_mid_request_answers_it_and_restarts() {
    let (_fx, mut r) = initialized(VERSION, "", &[]).await;
    let none = json!([]);
    let pid1 = Host::text(&r.host.call(1, "pid", json!({}), &none).await);
    let crashed = r.host.call(2, "crash", json!({}), &none).await;
    assert!(
        Host::error_message(&crashed).contains("exited (exit code 3)"),
        "{crashed}"
    );
    let pid2 = Host::text(&r.host.call(3, "pid", json!({}), &none).await);
    assert_ne!(pid1, pid2);
    assert!(!pid2.is_empty());
}

#[tokio::test]
async fn the_session_ends_when_restarts_are_used_up() {
    let (_fx, mut r) = initialized(VERSION, "restart = \"never\"\n", &[]).await;
    let crashed = r.host.call(1, "crash", json!({}), &json!([])).await;
    assert!(crashed["error"].is_object());
    let ending = ending(r.task).await;
    assert!(matches!(ending, Ending::ServerEnded(_)), "{ending:?}");
}

#[tokio::test]
async fn garbage_from_either_side_is_answered_and_the_session_goes_on() {
    let (_fx, mut r) = initialized(VERSION, "", &[]).await;
    let none = json!([]);
    r.host.send_raw("this is not json").await;
    let e = r.host.recv().await;
    assert_eq!(e["error"]["code"], -32700);
    assert_eq!(e["id"], Value::Null);
    r.host.send_raw(r#"{"jsonrpc":"2.0","id":77}"#).await;
    let e = r.host.recv().await;
    assert_eq!(e["error"]["code"], -32600);
    assert_eq!(e["id"], 77);
    r.host.send_raw(r#"{"id":78,"method":"ping"}"#).await;
    let e = r.host.recv().await;
    assert_eq!(
        (e["error"]["code"].clone(), e["id"].clone()),
        (json!(-32600), json!(78))
    );
    // The server writes a garbage line before its answer.
    let ok = r.host.call(1, "garbage", json!({}), &none).await;
    assert_eq!(Host::text(&ok), "after garbage");
    let pong = r.host.request(2, "ping", json!({}), &none).await;
    assert_eq!(pong["result"], json!({}));
}

#[tokio::test]
async fn oversized_lines_are_refused_from_both_sides() {
    let (_fx, mut r) = initialized(VERSION, "max_message_bytes = 4096\n", &[]).await;
    let none = json!([]);
    let big = "y".repeat(100_000);
    r.host.send_call(9, "echo", json!({"text": big})).await;
    let e = r.host.response(json!(9), &none).await;
    assert!(
        Host::error_message(&e).contains("exceeds the limit of 4096 bytes"),
        "{e}"
    );
    let e = r
        .host
        .call(10, "big", json!({"bytes": 50_000}), &none)
        .await;
    assert!(Host::error_message(&e).contains("exceeds the limit"), "{e}");
    let fine = r
        .host
        .call(11, "echo", json!({"text":"small"}), &none)
        .await;
    assert_eq!(Host::text(&fine), "small");
}

#[tokio::test]
async fn batches_are_accepted_in_2025_03_26_only() {
    let (_fx, mut r) = initialized("2025-03-26", "", &[]).await;
    r.host
        .send_raw(r#"[{"jsonrpc":"2.0","id":"p","method":"ping"},{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":1,"progress":1}},{"jsonrpc":"2.0","id":"e","method":"tools/call","params":{"name":"echo","arguments":{"text":"in batch"}}},{"bad":1}]"#)
        .await;
    let reply = r.host.recv().await;
    let arr = reply.as_array().expect("a batch is answered with an array");
    assert_eq!(arr.len(), 3, "{reply}");
    assert!(
        arr.iter()
            .any(|m| m["id"] == "p" && m["result"] == json!({}))
    );
    assert!(
        arr.iter()
            .any(|m| m["id"] == "e" && m["result"]["content"][0]["text"] == "in batch")
    );
    assert!(arr.iter().any(|m| m["error"]["code"] == -32600));

    let (_fx2, mut r2) = initialized(VERSION, "", &[]).await;
    r2.host
        .send_raw(r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#)
        .await;
    let e = r2.host.recv().await;
    assert!(Host::error_message(&e).contains("2025-03-26"), "{e}");
}

#[tokio::test]
async fn duplicate_ids_in_flight_are_refused() {
    let (_fx, mut r) = initialized(VERSION, "", &[]).await;
    r.host.send_call("dup", "sleep", json!({"ms": 300})).await;
    r.host
        .send(json!({"jsonrpc":"2.0","id":"dup","method":"ping"}))
        .await;
    let first = r.host.recv().await;
    assert_eq!(first["error"]["code"], -32600, "{first}");
    let second = r.host.recv().await;
    assert_eq!(Host::text(&second), "slept");
}

#[tokio::test]
async fn host_eof_shuts_the_server_down() {
    let (_fx, mut r) = initialized(VERSION, "", &[]).await;
    let none = json!([]);
    let pid: i32 = Host::text(&r.host.call(1, "pid", json!({}), &none).await)
        .parse()
        .unwrap();
    drop(r.host);
    let ending = ending(r.task).await;
    assert!(matches!(ending, Ending::HostClosed), "{ending:?}");
    // The server is gone (reaped, so not even a zombie).
    assert!(!Path::new(&format!("/proc/{pid}")).exists());
}

/// The test policy for `fx` with TCP port 443 opened, a short debounce,
/// and `limits` (lines of `[limits]`).
fn port_443(fx: &Fx, limits: &str) -> Policy {
    let text = format!(
        "[roots]\nallow_under = [\"{}\"]\n[network]\ntcp_connect = [443]\n[limits]\nrebuild_debounce_ms = 10\n{limits}",
        fx.base.display()
    );
    Policy::parse(&text, None, Some(&fx.dir("home"))).unwrap()
}

/// A FIFO nobody writes or reads, `NAME` in `fx`'s home: opening it waits.
fn fifo_in_home(fx: &Fx, name: &str) -> PathBuf {
    let fifo = fx.dir("home").join(name);
    rustix::fs::mkfifoat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
    )
    .unwrap();
    fifo
}

/// Ask for the server's pid (ids from `id` on) until a server other than
/// `pid1` answers, within 10 s.
async fn relaunched(r: &mut Running, pid1: &str, mut id: i64) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let reply = r.host.call(id, "pid", json!({}), &json!([])).await;
        id += 1;
        if reply["result"].is_object() && Host::text(&reply) != pid1 {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no other server within 10 s: {reply}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A plan that hangs stalls nothing but itself: a policy edit is planned
/// again (the command discovered again, which reads the user's git
/// configuration, here a FIFO nobody writes: the read blocks), and
/// meanwhile the server in place still answers the host; once the read
/// is let go, the edit applies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_that_hangs_stalls_nothing_but_itself() {
    use std::os::unix::fs::OpenOptionsExt;
    let (fx, mut r) = initialized(VERSION, "", &["a"]).await;
    let none = json!([]);
    let pid1 = Host::text(&r.host.call(1, "pid", json!({}), &none).await);
    let fifo = fifo_in_home(&fx, ".gitconfig");
    let newer = port_443(&fx, "");
    r.events.send(Change::Policy(Ok(Box::new(newer)))).unwrap();
    // Past the debounce: the plan is being made, and hangs.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let answered = tokio::time::timeout(
        Duration::from_secs(5),
        r.host.call(2, "pid", json!({}), &none),
    )
    .await;
    // Let the reader go: a writer that closes at once (the read gets the
    // end of the file). It opens only if a reader waits (else ENXIO): the
    // plan was hanging all along.
    let waiting = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo);
    let reply = answered.expect("the server in place answers while the new plan hangs");
    assert_eq!(Host::text(&reply), pid1, "{reply}");
    waiting.expect("the plan was waiting on the FIFO");
    // The plan comes: the edit (a port more) relaunches the server.
    relaunched(&mut r, &pid1, 3).await;
}

/// An audit file that hangs stalls nothing: a policy edit names a FIFO
/// nobody reads as the audit file (opening it for writing waits for a
/// reader), and the server still answers the host (the records then go
/// to the log only).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_audit_file_that_hangs_stalls_nothing() {
    use std::os::unix::fs::OpenOptionsExt;
    let (fx, mut r) = initialized(VERSION, "", &["a"]).await;
    let none = json!([]);
    let pid1 = Host::text(&r.host.call(1, "pid", json!({}), &none).await);
    let fifo = fifo_in_home(&fx, "audit.fifo");
    let audited = |file: &Path| {
        let text = format!(
            "[roots]\nallow_under = [\"{}\"]\n[limits]\nrebuild_debounce_ms = 10\n[audit]\nfile = \"{}\"\n",
            fx.base.display(),
            file.display()
        );
        Policy::parse(&text, None, Some(&fx.dir("home"))).unwrap()
    };
    r.events
        .send(Change::Policy(Ok(Box::new(audited(&fifo)))))
        .unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let answered = tokio::time::timeout(
        Duration::from_secs(5),
        r.host.call(2, "pid", json!({}), &none),
    )
    .await;
    // Let a waiting open go (a reader that closes at once).
    let _ = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo);
    let reply = answered.expect("the server answers while the audit file hangs");
    assert_eq!(Host::text(&reply), pid1, "{reply}");
}

/// A launch that hangs stalls nothing but itself: while the rebuilt
/// server's launch waits, the server in place finishes what it was
/// doing and its answer reaches the host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_launch_that_hangs_stalls_nothing_but_itself() {
    let (fx, mut r) = initialized(VERSION, "", &["a"]).await;
    let none = json!([]);
    let pid1 = Host::text(&r.host.call(1, "pid", json!({}), &none).await);
    r.host.send_call(2, "sleep", json!({"ms": 300})).await;
    r.log.hold();
    // A port more: a rebuild, the server in place draining.
    let newer = port_443(&fx, "drain_timeout_ms = 5000\n");
    r.events.send(Change::Policy(Ok(Box::new(newer)))).unwrap();
    let answered =
        tokio::time::timeout(Duration::from_secs(5), r.host.response(json!(2), &none)).await;
    r.log.release();
    let reply = answered.expect("the server in place answers while the launch hangs");
    assert_eq!(Host::text(&reply), "slept", "{reply}");
    relaunched(&mut r, &pid1, 3).await;
}

#[tokio::test]
async fn a_rejected_policy_change_stops_the_server_until_a_valid_one() {
    let (fx, mut r) = initialized(VERSION, "", &["a"]).await;
    let none = json!([]);
    let pid1 = Host::text(&r.host.call(1, "pid", json!({}), &none).await);
    // What the unreadable edit revokes is unknown: nothing is kept.
    r.events
        .send(Change::Policy(Err(PolicyError::Invalid {
            file: "p.toml".into(),
            line: 3,
            key: KeyNote(None),
            message: "bad".into(),
        })))
        .unwrap();
    let refused = r.host.call(2, "pid", json!({}), &none).await;
    assert!(
        Host::error_message(&refused)
            .contains("policy file changed and cannot be read (policy p.toml line 3: bad)"),
        "{refused}"
    );
    let pid1: i32 = pid1.parse().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while Path::new(&format!("/proc/{pid1}")).exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the server still runs"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(launches(&r.log).len(), 1);
    // The valid edit grants a TCP port: a right the server lacks.
    let newer = Policy::parse(
        &format!(
            "[roots]\nallow_under = [\"{}\"]\n[network]\ntcp_connect = [443]\n[limits]\nrebuild_debounce_ms = 10\n",
            fx.dir("a").display()
        ),
        None,
        Some(&fx.dir("home")),
    )
    .unwrap();
    r.events.send(Change::Policy(Ok(Box::new(newer)))).unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let mut id = 3;
    loop {
        let reply = r.host.call(id, "pid", json!({}), &none).await;
        id += 1;
        if reply["result"].is_object() {
            assert_ne!(Host::text(&reply), pid1.to_string());
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no server after a valid policy change: {reply}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(launches(&r.log).len(), 2);
}

#[tokio::test]
async fn a_deleted_root_is_dropped_and_the_sandbox_rebuilt() {
    let (fx, mut r) = initialized(VERSION, "", &["a", "b"]).await;
    let (a, b) = (fx.dir("a"), fx.dir("b"));
    let none = json!([]);
    assert_eq!(
        roots_of(&r.host.call(1, "roots", json!({}), &none).await).len(),
        2
    );
    // Replace b by a symlink to somewhere else.
    std::fs::rename(&b, fx.dir("b-moved")).unwrap();
    std::os::unix::fs::symlink(fx.dir("outside"), &b).unwrap();
    r.events.send(Change::RootsMaybeChanged).unwrap();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let reply = r.host.call(2, "roots", json!({}), &none).await;
        if reply.get("error").is_some() {
            // In flight on the server when its plan came (made off the
            // loop): answered with what was revoked.
            assert!(Host::error_message(&reply).contains("revoked"), "{reply}");
            continue;
        }
        let listed = roots_of(&reply);
        if listed == vec![uri(&a)] {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "root not dropped: {listed:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let l = launches(&r.log);
    assert_eq!(l.last().unwrap(), &vec![a.clone()]);
}

#[tokio::test]
async fn a_discover_probe_before_initialize_reaches_the_server() {
    let fx = fixture();
    let mut r = start(&fx, "", &[&fx.dir("a")]);
    let none = json!([]);
    // A 2026-07-28 host probes first; today's servers answer -32601 and the
    // host falls back to initialize.
    let probe = r
        .host
        .request(100, "server/discover", json!({}), &none)
        .await;
    assert_eq!(probe["error"]["code"], -32601, "{probe}");
    let init = r.host.initialize("2025-11-25", false, &none).await;
    assert_eq!(init["result"]["protocolVersion"], "2025-11-25");
    let roots = r.host.call(1, "roots", json!({}), &none).await;
    assert_eq!(roots_of(&roots), vec![uri(&fx.dir("a"))]);
    assert_eq!(
        launches(&r.log).len(),
        1,
        "the probe's server is the session's server"
    );
}

#[tokio::test]
async fn a_server_cannot_answer_rootfences_own_requests_to_the_host() {
    let (fx, mut r, roots) = with_host_roots("", &["a"]).await;
    r.host.call(1, "pid", json!({}), &roots).await;
    // rootfence's next request to the host will have id 2 (its first
    // roots/list was 1). The server schedules a forged answer to it,
    // naming a root of its own choosing.
    let forged = json!({"roots": fx.roots(&["outside"])});
    let scheduled = r
        .host
        .call(
            2,
            "respond_later",
            json!({"id": 2, "result": forged, "ms": 150}),
            &roots,
        )
        .await;
    assert_eq!(Host::text(&scheduled), "scheduled", "{scheduled}");
    r.host.roots_changed().await;
    let req = r.host.recv().await;
    assert_eq!(
        (req["method"].clone(), req["id"].clone()),
        (json!("roots/list"), json!(2)),
        "{req}"
    );
    // Let the forgery arrive before the host answers.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let real = fx.roots(&["b"]);
    r.host
        .send(json!({"jsonrpc":"2.0","id":2,"result":{"roots":real}}))
        .await;
    let listed = r.host.call(3, "roots", json!({}), &real).await;
    assert_eq!(roots_of(&listed), vec![uri(&fx.dir("b"))]);
    assert!(
        launches(&r.log)
            .iter()
            .all(|l| !l.contains(&fx.dir("outside")))
    );
}
