//! `rootfence run`: nothing a server starts outlives its session, with and
//! without namespaces. The server here is a small stdio JSON-RPC program
//! that, before answering, leaves a daemon behind (fork, setsid, fork) that
//! keeps writing in its root.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::{Tree, python, rootfence};

const SERVER: &str = r#"
import json, os, sys, time
log, marker = sys.argv[1], sys.argv[2]
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        n = os.open('/dev/null', os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(n, fd)
        os.execv(sys.executable, [sys.executable, '-c',
            "import time\nwhile True:\n    open(%r, 'a').write('x')\n    time.sleep(0.02)" % log, marker])
    os._exit(0)
for line in sys.stdin:
    req = json.loads(line)
    if 'id' in req:
        print(json.dumps({"jsonrpc": "2.0", "id": req["id"], "result": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "serverInfo": {"name": "daemonizing", "version": "1"}}}), flush=True)
"#;

fn session_leaves_nothing_behind(t: &Tree) {
    let marker = format!(
        "rootfence-run-daemon-{}-{}",
        std::process::id(),
        t.namespaces
    );
    let log = t.r.join("daemon.log");
    let mut args = vec![
        "run".to_string(),
        "--root".into(),
        t.r.display().to_string(),
    ];
    if !t.namespaces {
        args.push("--policy".into());
        args.push(t.policy("no-ns.toml", "version = 1\n"));
    }
    let mut child = Command::new(rootfence())
        .args(&args)
        .arg("--")
        .arg(python())
        .arg("-c")
        .arg(SERVER)
        .arg(&log)
        .arg(&marker)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", &t.home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{{"name":"t","version":"1"}}}}}}"#
    )
    .unwrap();
    let mut line = String::new();
    stdout.read_line(&mut line).unwrap();
    assert!(line.contains("daemonizing"), "{line}");
    std::thread::sleep(Duration::from_millis(200));
    let size = || std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
    assert!(size() > 0, "the daemon ran while the session lived");
    // The host ends the session.
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let after = size();
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        size(),
        after,
        "the daemon kept writing after the session ended"
    );
    assert_eq!(common::processes_with(&marker), Vec::<u32>::new());
}

#[test]
fn a_daemon_left_by_the_server_ends_with_the_session() {
    session_leaves_nothing_behind(&Tree::new());
}

#[test]
fn a_daemon_left_by_the_server_ends_with_the_session_without_namespaces() {
    session_leaves_nothing_behind(&Tree::without_namespaces());
}
