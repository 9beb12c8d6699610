//! The real peers of the end-to-end tests, installed from the lockfiles in
//! tests/peers by `tests/peers/install.sh` (which `scripts/test.sh` runs):
//! node servers from npm and the Python SDK host (tests/peers/host.py).
//! A missing peer fails the test with what to run; nothing is skipped.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

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
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("scenario.json");
    std::fs::write(&f, scenario.to_string()).unwrap();
    let out = Command::new(python())
        .arg(peers().join("host.py"))
        .arg(&f)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "host failed: {stderr}\n{stdout}");
    let mut lines: Vec<Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let summary = lines.pop().unwrap();
    assert_eq!(summary["summary"], true, "{stdout}");
    (lines, summary)
}
