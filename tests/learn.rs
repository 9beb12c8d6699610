//! `rootfence learn`: a server that needs a file and a directory outside
//! its roots starts after the rounds learn them, and the lines printed are
//! exactly those; a server that asks for a secret gets no line for it.

use std::path::Path;
use std::process::Command;

fn rootfence() -> &'static str {
    env!("CARGO_BIN_EXE_rootfence")
}

/// A minimal MCP server in python that first runs `prelude`.
fn server(dir: &Path, prelude: &str) -> std::path::PathBuf {
    let p = dir.join("srv.py");
    std::fs::write(
        &p,
        format!(
            "import json, sys\n{prelude}\n\
             for line in sys.stdin:\n\
             \x20   m = json.loads(line)\n\
             \x20   if m.get('method') == 'initialize':\n\
             \x20       r = {{'protocolVersion': '2025-06-18', 'capabilities': {{'tools': {{}}}}, 'serverInfo': {{'name': 't', 'version': '1'}}}}\n\
             \x20   elif m.get('method') == 'tools/list':\n\
             \x20       r = {{'tools': [{{'name': 'x', 'inputSchema': {{'type': 'object'}}}}]}}\n\
             \x20   else:\n\
             \x20       continue\n\
             \x20   print(json.dumps({{'jsonrpc': '2.0', 'id': m['id'], 'result': r}}), flush=True)\n"
        ),
    )
    .unwrap();
    p
}

fn learn(base: &Path, home: &Path, script: &Path) -> (bool, String, String) {
    let out = Command::new(rootfence())
        .args(["learn", "--timeout", "20", "--"])
        .arg("/usr/bin/python3")
        .arg(script)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", home)
        .current_dir(base)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn learn_finds_the_reads_and_writes_a_server_needs_and_it_starts() {
    let t = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(t.path()).unwrap();
    let outside = base.join("outside");
    let home = base.join("home");
    std::fs::create_dir_all(outside.join("logs")).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(outside.join("conf.ini"), "x=1\n").unwrap();
    let script = server(
        &base,
        &format!(
            "open('{o}/conf.ini').read()\nopen('{o}/logs/server.log', 'a').write('started\\n')",
            o = outside.display()
        ),
    );
    // Fenced as it is, the server dies: the test can fail.
    let (ok, stdout, stderr) = learn(&base, &home, &script);
    assert!(ok, "{stdout}\n{stderr}");
    assert_eq!(
        stdout,
        format!(
            "# Add to the server's policy (with these, it started):\n[runtime]\nread = [\"{o}/conf.ini\"]\nwrite = [\"{o}/logs\"]\n",
            o = outside.display()
        ),
        "{stderr}"
    );
    assert!(
        stderr.contains("round 1") && stderr.contains("round 3"),
        "{stderr}"
    );
    // Its log was written for real in the last round, under the learned
    // policy.
    assert!(outside.join("logs/server.log").exists());
}

#[test]
fn learn_never_proposes_a_secret() {
    let t = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(t.path()).unwrap();
    let home = base.join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_rsa"), "KEY").unwrap();
    let script = server(
        &base,
        &format!("open('{}/.ssh/id_rsa').read()", home.display()),
    );
    let (ok, stdout, stderr) = learn(&base, &home, &script);
    assert!(!ok, "{stdout}\n{stderr}");
    assert!(!stdout.contains(".ssh"), "{stdout}");
    assert!(
        stderr.contains("which is denied (~/.ssh built-in)"),
        "{stderr}"
    );
    assert!(stderr.contains("nothing more to learn"), "{stderr}");
}
