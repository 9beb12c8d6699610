//! Real servers start under the default sandbox: the npm filesystem server
//! through `npx -y` from an offline cache, a Python program through a
//! pyenv shim and a pyenv interpreter, and node itself.
//!
//! These tests need `tests/peers/install.sh` to have run (it installs the
//! locked npm packages and fills the npx cache); they fail, never skip, when
//! something is missing.

use crate::common;

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::{SECRET, Tree, rootfence, stderr, stdout};

fn peers() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers")
}

fn which(name: &str) -> PathBuf {
    for dir in ["/usr/local/bin", "/usr/bin", "/bin"] {
        let p = Path::new(dir).join(name);
        if p.exists() {
            return p;
        }
    }
    panic!(
        "{name} is required by this test and is not in /usr/local/bin, /usr/bin or /bin: apt-get install -y nodejs npm python3"
    )
}

/// The npm cache filled by `tests/peers/install.sh` and the locked
/// version of the filesystem server.
fn npx_cache() -> (PathBuf, String) {
    let cache = peers().join(".npm-cache");
    let lock = peers().join("package-lock.json");
    let lock: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(&lock).expect("tests/peers/package-lock.json"),
    )
    .expect("package-lock.json is JSON");
    let version =
        lock["packages"]["node_modules/@modelcontextprotocol/server-filesystem"]["version"]
            .as_str()
            .expect("server-filesystem is locked")
            .to_string();
    assert!(
        cache.join("_npx").is_dir(),
        "the npx cache {} is not filled: run tests/peers/install.sh first",
        cache.display()
    );
    (cache, version)
}

/// Lines of a child's stdout, read on a thread.
fn lines_of(child: &mut Child) -> mpsc::Receiver<String> {
    let out = child.stdout.take().expect("stdout piped");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

fn response(rx: &mpsc::Receiver<String>, id: u64) -> serde_json::Value {
    loop {
        let line = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("no response {id} from the server: {e}"));
        let v: serde_json::Value = match serde_json::from_str(&line) {
            Ok(v) => v,
            Err(_) => continue,
        };
        if v["id"] == id {
            return v;
        }
    }
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"rootfence-test","version":"0"}}}"#;

/// Start the npm filesystem server through `npx -y` (offline, from the
/// cache) serving `dir`, and initialize it.
fn fs_server(t: &Tree, dir: &Path) -> (Child, std::process::ChildStdin, mpsc::Receiver<String>) {
    which("npx");
    let (cache, version) = npx_cache();
    let mut child = t
        .command(
            &[],
            &[
                "npx",
                "-y",
                &format!("@modelcontextprotocol/server-filesystem@{version}"),
                dir.to_str().unwrap(),
            ],
        )
        .env("npm_config_cache", &cache)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = lines_of(&mut child);
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{INITIALIZE}").unwrap();
    let init = response(&rx, 1);
    assert!(init["result"]["serverInfo"].is_object(), "{init}");
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .unwrap();
    (child, stdin, rx)
}

/// The installed filesystem server run with node directly, serving `dir`.
fn node_fs_server(
    t: &Tree,
    dir: &Path,
) -> (Child, std::process::ChildStdin, mpsc::Receiver<String>) {
    let node = which("node");
    let js = peers().join("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    assert!(
        js.is_file(),
        "{} missing: run tests/peers/install.sh",
        js.display()
    );
    let mut child = t
        .command(
            &[],
            &[
                node.to_str().unwrap(),
                js.to_str().unwrap(),
                dir.to_str().unwrap(),
            ],
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = lines_of(&mut child);
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{INITIALIZE}").unwrap();
    let init = response(&rx, 1);
    assert!(init["result"]["serverInfo"].is_object(), "{init}");
    (child, stdin, rx)
}

fn read_text_file(
    stdin: &mut std::process::ChildStdin,
    rx: &mpsc::Receiver<String>,
    id: u64,
    path: &Path,
) -> serde_json::Value {
    writeln!(
        stdin,
        "{}",
        serde_json::json!({"jsonrpc":"2.0","id":id,"method":"tools/call",
            "params":{"name":"read_text_file","arguments":{"path":path}}})
    )
    .unwrap();
    response(rx, id)
}

#[test]
fn npx_filesystem_server_starts_offline_and_serves_its_root() {
    let t = Tree::new();
    std::fs::write(t.r.join("hello.txt"), "hello from the root").unwrap();
    let (child, mut stdin, rx) = fs_server(&t, &t.r);
    let ok = read_text_file(&mut stdin, &rx, 2, &t.r.join("hello.txt"));
    assert!(
        ok.to_string().contains("hello from the root"),
        "reading inside the root: {ok}"
    );
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    let err = stderr(&out);
    assert!(
        err.contains("Secure MCP Filesystem Server running on stdio"),
        "stderr: {err}"
    );
}

#[test]
fn npx_server_cannot_read_outside_even_when_told_to_serve_it() {
    // The server is told to serve a directory that is not a root. Without
    // namespaces its own path checks pass and Landlock refuses the read.
    // (npx needs its cache's private layer, which needs namespaces: the
    // installed server is run with node directly.)
    let t = Tree::without_namespaces();
    let (child, mut stdin, rx) = node_fs_server(&t, &t.outside);
    let refused = read_text_file(&mut stdin, &rx, 2, &t.outside.join("secret"));
    let text = refused.to_string();
    assert!(!text.contains(SECRET), "{text}");
    assert!(
        text.contains("EACCES") || text.contains("ermission denied"),
        "{text}"
    );
    drop(stdin);
    child.wait_with_output().unwrap();
}

#[test]
fn npx_server_told_to_serve_a_directory_outside_its_view_does_not_see_it() {
    // In its own filesystem view the directory does not exist at all: the
    // server refuses to start on it, and nothing of it leaks.
    which("npx");
    let t = Tree::new();
    let (cache, version) = npx_cache();
    let out = t
        .command(
            &[],
            &[
                "npx",
                "-y",
                &format!("@modelcontextprotocol/server-filesystem@{version}"),
                t.outside.to_str().unwrap(),
            ],
        )
        .env("npm_config_cache", &cache)
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(!out.status.success(), "{err}");
    assert!(err.contains(t.outside.to_str().unwrap()), "{err}");
    assert!(!stdout(&out).contains(SECRET) && !err.contains(SECRET));
}

/// A tiny stdio JSON-RPC server: answers `initialize` with the Python
/// version and whether it could read the outside secret.
const PY_SERVER: &str = r#"
import json, sys
outside = sys.argv[1]
try:
    open(outside).read()
    leaked = True
except OSError:
    leaked = False
print("python server running on stdio", file=sys.stderr, flush=True)
for line in sys.stdin:
    req = json.loads(line)
    print(json.dumps({"jsonrpc": "2.0", "id": req["id"], "result": {
        "serverInfo": {"name": "py", "version": sys.version.split()[0]},
        "executable": sys.executable, "leaked": leaked}}), flush=True)
"#;

fn pyenv_root() -> PathBuf {
    let root = std::env::var_os("PYENV_ROOT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/root/.pyenv"));
    assert!(
        root.join("shims/python3").exists() && root.join("versions").is_dir(),
        "a pyenv install with shims/python3 and versions/ is required at {} (set PYENV_ROOT)",
        root.display()
    );
    root
}

fn pyenv_version(root: &Path) -> PathBuf {
    let mut versions: Vec<PathBuf> = std::fs::read_dir(root.join("versions"))
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("bin/python3").exists())
        .collect();
    versions.sort();
    versions
        .pop()
        .unwrap_or_else(|| panic!("no pyenv version with bin/python3 under {}", root.display()))
}

fn run_py_server(t: &Tree, python: &Path) -> serde_json::Value {
    std::fs::write(t.ro.join("server.py"), PY_SERVER).unwrap();
    let secret = t.outside.join("secret");
    let mut child = t
        .command(
            &[],
            &[
                python.to_str().unwrap(),
                t.ro.join("server.py").to_str().unwrap(),
                secret.to_str().unwrap(),
            ],
        )
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = lines_of(&mut child);
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, "{INITIALIZE}").unwrap();
    let v = response(&rx, 1);
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "stderr: {}", stderr(&out));
    assert!(stderr(&out).contains("python server running on stdio"));
    assert_eq!(v["result"]["leaked"], false, "{v}");
    v
}

#[test]
fn python_server_starts_through_a_pyenv_shim() {
    let root = pyenv_root();
    let version = pyenv_version(&root);
    let t = Tree::new();
    let v = run_py_server(&t, &root.join("shims/python3"));
    let exe = v["result"]["executable"].as_str().unwrap_or_default();
    assert!(exe.starts_with(root.to_str().unwrap()), "{v}");
    let _ = version;
}

#[test]
fn python_server_starts_from_a_pyenv_interpreter() {
    let root = pyenv_root();
    let version = pyenv_version(&root);
    let t = Tree::new();
    let python = version.join("bin/python3");
    let v = run_py_server(&t, &python);
    let want = version.file_name().unwrap().to_string_lossy().into_owned();
    assert_eq!(v["result"]["serverInfo"]["version"], want.as_str(), "{v}");
}

/// A python probe ([`common::PRELUDE`] and `code`) run confined with `path`
/// as its `PATH` and `home` as its `HOME`.
fn probe_with_path(t: &Tree, home: &Path, path: &str, code: &str) -> common::Probe {
    let py = common::python();
    let out = t
        .command(
            &[],
            &[
                py.to_str().unwrap(),
                "-c",
                &format!("{}\n{code}", common::PRELUDE),
            ],
        )
        .env("PATH", path)
        .env("HOME", home)
        .output()
        .unwrap();
    common::Probe::new(out)
}

#[test]
fn python_runs_through_pyenv_shims_found_on_path() {
    // The shims on PATH run `pyenv exec`: pyenv's commands, its global
    // version and its installs are granted; the rest of its checkout is not.
    let root = pyenv_root();
    let version = pyenv_version(&root);
    let t = Tree::new();
    let path = format!("{r}/shims:{r}/bin:/usr/bin:/bin", r = root.display());
    let readme = root.join("README.md");
    assert!(readme.is_file(), "{} is missing", readme.display());
    let p = probe_with_path(
        &t,
        &t.home,
        &path,
        &format!(
            "import subprocess\n\
             out = subprocess.run(['python3', '-c', 'import sys; print(sys.prefix)'], capture_output=True, text=True)\n\
             print('prefix=' + out.stdout.strip() + out.stderr.strip())\n\
             check('checkout', lambda p: read(p), path='{readme}')\n\
             check('checkout_twin', lambda p: read(p), path='{version}')",
            readme = readme.display(),
            version = root.join("version").display(),
        ),
    );
    p.refused("checkout").allowed("checkout_twin");
    let prefix = p.value("prefix");
    assert!(
        Path::new(&prefix).starts_with(root.join("versions")),
        "{prefix} (the newest is {})",
        version.display()
    );
}

#[test]
fn cargo_runs_through_rustups_proxies_found_on_path() {
    // ~/.cargo/bin holds rustup's proxies: they and rustup's toolchains
    // are granted, cargo's registry beside them is not.
    let home = PathBuf::from(std::env::var("HOME").expect("HOME"));
    let cargo_bin = home.join(".cargo/bin");
    let registry = home.join(".cargo/registry");
    assert!(
        cargo_bin.join("cargo").exists()
            && home.join(".rustup/toolchains").is_dir()
            && registry.is_dir(),
        "rustup's default layout is required under {} (~/.cargo/bin, ~/.rustup, ~/.cargo/registry)",
        home.display()
    );
    let t = Tree::new();
    let path = format!("{}:/usr/bin:/bin", cargo_bin.display());
    let p = probe_with_path(
        &t,
        &home,
        &path,
        &format!(
            "import subprocess\n\
             out = subprocess.run(['cargo', '--version'], capture_output=True, text=True)\n\
             print('version=' + out.stdout.strip() + out.stderr.strip())\n\
             check('registry', lambda p: os.listdir(p), path='{registry}')\n\
             check('registry_twin', lambda p: os.listdir(p), path='{bin}')",
            registry = registry.display(),
            bin = cargo_bin.display(),
        ),
    );
    p.refused("registry").allowed("registry_twin");
    assert!(
        p.value("version").starts_with("cargo "),
        "{}",
        p.value("version")
    );
}

#[test]
fn python_server_starts_from_the_system_python() {
    let t = Tree::new();
    run_py_server(&t, &common::python());
}

#[test]
fn node_starts_and_is_confined() {
    let node = which("node");
    let t = Tree::new();
    let out = t.run(
        &[],
        &[
            node.to_str().unwrap(),
            "-e",
            &format!(
                "const fs = require('fs');\n\
                 fs.writeFileSync('{r}/n.txt', 'node was here');\n\
                 console.log('inside=' + fs.readFileSync('{r}/n.txt', 'utf8'));\n\
                 try {{ fs.readFileSync('{o}/secret'); console.log('outside=OK') }}\n\
                 catch (e) {{ console.log('outside=' + e.code) }}\n\
                 require('child_process').execFileSync('/bin/true');\n\
                 console.log('child=OK');\n\
                 console.log('tmp=' + require('os').tmpdir());",
                r = t.r.display(),
                o = t.outside.display()
            ),
        ],
    );
    let s = stdout(&out);
    assert!(out.status.success(), "{s}\n{}", stderr(&out));
    assert!(s.contains("inside=node was here"), "{s}");
    // Refused by Landlock, or not even there in the server's own view.
    assert!(
        s.contains("outside=EACCES") || s.contains("outside=ENOENT"),
        "{s}"
    );
    assert!(s.contains("child=OK"), "{s}");
    assert!(s.contains("tmp=") && s.contains("/rootfence-"), "{s}");
}

#[test]
fn rootfence_exec_runs_from_a_path_search() {
    // `python3` found on PATH, not given as an absolute path.
    let t = Tree::new();
    let out = Command::new(rootfence())
        .args(["exec", "--", "python3", "-c", "print('found')"])
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", &t.home)
        .output()
        .unwrap();
    assert_eq!(stdout(&out).trim(), "found", "{}", stderr(&out));
}

/// A package runner rootfence knows by its table (bun here, a stand-in
/// with bun's question and answer) gets the cache it names: the server it
/// runs is read from the cache, offline, and what it writes there stays
/// in a private layer.
#[test]
fn a_launcher_is_asked_where_its_cache_is_and_gets_it() {
    let t = Tree::new();
    let tools = t.p("tools/bin");
    std::fs::create_dir_all(&tools).unwrap();
    // The stand-in notes each time it is asked in a file that is there
    // already: it is asked blind to the root, and the tree's base, on the
    // way to the root, takes no new entry from it.
    let asked = t.p("asked");
    std::fs::write(&asked, "").unwrap();
    let bun = tools.join("bun");
    std::fs::write(
        &bun,
        format!(
            "#!/bin/sh\n\
             dir=${{BUN_INSTALL_CACHE_DIR:-$HOME/.bun/install/cache}}\n\
             if [ \"$1 $2\" = \"pm cache\" ]; then echo x >> {asked}; echo \"$HOME/.bun/install/cache\"; exit 0; fi\n\
             cat \"$dir/$1/server.txt\" || {{ echo 'error: EAI_AGAIN registry.npmjs.org' >&2; exit 1; }}\n\
             echo planted > \"$dir/planted\" && echo wrote\n",
            asked = asked.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&bun, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("bun", tools.join("bunx")).unwrap();
    let cache = t.home.join(".bun/install/cache");
    std::fs::create_dir_all(cache.join("some-server")).unwrap();
    std::fs::write(
        cache.join("some-server/server.txt"),
        "served from the cache\n",
    )
    .unwrap();
    let path = format!("{}:/usr/local/bin:/usr/bin:/bin", tools.display());
    let run = || {
        t.command(&[], &["bunx", "some-server"])
            .env("PATH", &path)
            .output()
            .unwrap()
    };
    let out = run();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "served from the cache\nwrote\n",
        "{}",
        stderr(&out)
    );
    // Written to the private layer, never the real cache.
    assert!(!cache.join("planted").exists());
    // Asked once: the answer is kept for the next launch.
    let out = run();
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(std::fs::read_to_string(&asked).unwrap().lines().count(), 1);
    // explain says which cache and why.
    let out = t
        .rootfence_command()
        .args(["explain", "--", "bunx", "some-server"])
        .env_clear()
        .env("PATH", &path)
        .env("HOME", &t.home)
        .output()
        .unwrap();
    let text = stdout(&out);
    assert!(text.contains("as `bun pm cache` says"), "{text}");
    assert!(text.contains(&cache.display().to_string()), "{text}");
    // A command that runs no launcher asks none, and gets no such cache.
    let out = t
        .command(
            &[],
            &[
                "/bin/sh",
                "-c",
                &format!("cat {}/some-server/server.txt", cache.display()),
            ],
        )
        .output()
        .unwrap();
    assert!(!out.status.success(), "{}", stdout(&out));
}

/// A launcher that fails when asked blind to the places the server may
/// write (here it makes a new file in the home directory, which lies on
/// the way to the root) is said to have failed, with what it said and the
/// line that fixes it, rather than leaving a cache silently ungranted.
#[test]
fn a_launcher_failing_when_asked_blind_is_said() {
    let t = Tree::new();
    let tools = t.p("tools/bin");
    std::fs::create_dir_all(&tools).unwrap();
    let bun = tools.join("bun");
    std::fs::write(
        &bun,
        "#!/bin/sh\n\
         touch \"$HOME/.first-run\" || { echo 'error: cannot write ~/.first-run' >&2; exit 1; }\n\
         echo \"$HOME/.bun/install/cache\"\n",
    )
    .unwrap();
    std::fs::set_permissions(&bun, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink("bun", tools.join("bunx")).unwrap();
    // The root lies in the home directory.
    let root = t.home.join("proj");
    std::fs::create_dir_all(&root).unwrap();
    let out = t
        .rootfence_command()
        .args([
            "explain",
            "--root",
            root.to_str().unwrap(),
            "--",
            "bunx",
            "x",
        ])
        .env_clear()
        .env("PATH", format!("{}:/usr/bin:/bin", tools.display()))
        .env("HOME", &t.home)
        .output()
        .unwrap();
    let err = stderr(&out);
    assert!(
        err.contains("bun pm cache failed when asked blind")
            && err.contains("cannot write ~/.first-run")
            && err.contains("[runtime] read"),
        "{err}"
    );
    assert!(!t.home.join(".first-run").exists());
}
