//! The real peers of the end-to-end tests, installed from the lockfiles in
//! tests/peers by `tests/peers/install.sh` (which `scripts/test.sh` runs):
//! node servers from npm and the Python SDK host (tests/peers/host.py).
//! A missing peer fails the test with what to run; nothing is skipped.

#![allow(dead_code)]

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// tests/peers.
pub fn peers() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers")
}

/// The venv's python, with the `mcp` SDK.
pub fn python() -> PathBuf {
    let p = peers().join(".venv/bin/python");
    assert!(
        p.exists(),
        "{} is missing: run tests/peers/install.sh (scripts/test.sh does)",
        p.display()
    );
    p
}

/// The system node.
pub fn node() -> PathBuf {
    for d in ["/usr/bin/node", "/usr/local/bin/node"] {
        if Path::new(d).exists() {
            return PathBuf::from(d);
        }
    }
    panic!("node is required by this test: install Node.js (apt-get install nodejs)");
}

/// `dist/index.js` of an installed npm package (a directory under
/// tests/peers/node_modules).
pub fn server_js(package_dir: &str) -> PathBuf {
    let p = peers()
        .join("node_modules")
        .join(package_dir)
        .join("dist/index.js");
    assert!(
        p.exists(),
        "{} is missing: run tests/peers/install.sh",
        p.display()
    );
    p
}

/// Run host.py with a scenario (see its docstring); returns its step
/// results and its summary line.
pub fn run_host(scenario: &Value) -> (Vec<Value>, Value) {
    let run = run_host_within(scenario, Duration::from_secs(600));
    (run.steps, run.summary)
}

/// What a host.py run gave: its step results, its summary line, and its
/// stderr (where the server's stderr goes: rootfence's log lines and the
/// server's own).
pub struct HostRun {
    pub steps: Vec<Value>,
    pub summary: Value,
    pub stderr: String,
}

/// Run host.py with a scenario; fail the test with everything host.py and
/// the server printed if it fails or is not done within `limit` (a hung
/// session must not hang the suite).
pub fn run_host_within(scenario: &Value, limit: Duration) -> HostRun {
    try_run_host_within(scenario, limit).unwrap_or_else(|e| panic!("{e}"))
}

/// Run host.py with a scenario; an error with everything host.py and the
/// server printed if the host fails (it could not start the server, the
/// connection closed, ...) or is not done within `limit` (it is killed).
pub fn try_run_host_within(scenario: &Value, limit: Duration) -> Result<HostRun, String> {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("scenario.json");
    std::fs::write(&f, scenario.to_string()).unwrap();
    let mut child = Command::new(python())
        .arg(peers().join("host.py"))
        .arg(&f)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let drain = |mut r: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut s = Vec::new();
            let _ = r.read_to_end(&mut s);
            String::from_utf8_lossy(&s).into_owned()
        })
    };
    let out = drain(Box::new(child.stdout.take().unwrap()));
    let err = drain(Box::new(child.stderr.take().unwrap()));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let stdout = out.join().unwrap();
    let stderr = err.join().unwrap();
    let Some(status) = status else {
        return Err(format!(
            "host.py did not finish within {limit:?}\nstderr:\n{stderr}\nstdout:\n{stdout}"
        ));
    };
    if !status.success() {
        return Err(format!("host failed: {stderr}\n{stdout}"));
    }
    let mut steps: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let summary = steps.pop().unwrap();
    assert_eq!(summary["summary"], true, "{stdout}");
    Ok(HostRun {
        steps,
        summary,
        stderr,
    })
}

/// A file or directory `install.sh` makes, or a failure saying to run it.
pub fn installed(rel: &str) -> PathBuf {
    let p = peers().join(rel);
    assert!(
        p.exists(),
        "{} is missing: run tests/peers/install.sh (scripts/test.sh does)",
        p.display()
    );
    p
}

/// The version package-lock.json pins for the npm package `name`.
pub fn locked_version(name: &str) -> String {
    let lock: Value =
        serde_json::from_str(&std::fs::read_to_string(peers().join("package-lock.json")).unwrap())
            .unwrap();
    lock["packages"][format!("node_modules/{name}")]["version"]
        .as_str()
        .unwrap_or_else(|| panic!("{name} is not in tests/peers/package-lock.json"))
        .to_string()
}
