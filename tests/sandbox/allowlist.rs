//! The seccomp allow-list against real work: node, python, uv, git and a
//! shell each run a normal workload (`tests/allowlist/`) under `rootfence
//! exec --report-refused-calls`, with and without namespaces, and must
//! finish with nothing refused. A call a runtime needs and the list lacks
//! shows here by name.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::{need, rootfence};

struct Run {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    home: PathBuf,
    policy: Option<PathBuf>,
}

impl Run {
    fn new(namespaces: bool) -> Run {
        let tmp = tempfile::Builder::new()
            .prefix("rootfence-allowlist-")
            .tempdir()
            .unwrap();
        let base = std::fs::canonicalize(tmp.path()).unwrap();
        let root = base.join("r");
        let home = base.join("home");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        let policy = (!namespaces).then(|| {
            let p = base.join("no-namespaces.toml");
            std::fs::write(&p, "version = 1\n[isolation]\nnamespaces = \"off\"\n").unwrap();
            p
        });
        Run {
            _tmp: tmp,
            root,
            home,
            policy,
        }
    }

    /// Run `argv` confined (`{root}` and `{port}` in it replaced); its
    /// stdout and stderr, once it exited 0.
    fn workload(
        &self,
        argv: &[&str],
        port: Option<u16>,
        env: &[(&str, &str)],
        ro: &[&Path],
    ) -> (String, String) {
        let mut c = Command::new(rootfence());
        c.arg("exec")
            .arg("--report-refused-calls")
            .arg("--root")
            .arg(&self.root)
            .arg("--ro-root")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/allowlist"));
        if let Some(p) = &self.policy {
            c.arg("--policy").arg(p);
        }
        if let Some(port) = port {
            c.arg("--allow-tcp-bind").arg(port.to_string());
            c.arg("--allow-tcp-connect").arg(port.to_string());
        }
        for (k, _) in env {
            c.arg("--env").arg(k);
        }
        for d in ro {
            c.arg("--ro-root").arg(d);
        }
        let root = self.root.to_string_lossy();
        let port = port.map(|p| p.to_string()).unwrap_or_default();
        c.arg("--").args(
            argv.iter()
                .map(|a| a.replace("{root}", &root).replace("{port}", &port)),
        );
        c.env_clear()
            .env("PATH", "/usr/local/bin:/usr/bin:/bin")
            .env("HOME", &self.home)
            .env("LANG", "C.UTF-8")
            .envs(env.iter().copied())
            .current_dir(&self.root)
            .stdin(Stdio::null());
        let out = c.output().expect("run rootfence exec");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(
            out.status.success(),
            "{argv:?} failed under the allow-list: {:?}\nstdout:\n{stdout}\nstderr:\n{stderr}",
            out.status
        );
        (stdout, stderr)
    }
}

fn script(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/allowlist")
        .join(name)
        .to_string_lossy()
        .into_owned()
}

/// The calls reported refused, with the arguments their rule checks.
fn refused(stderr: &str) -> Vec<String> {
    stderr
        .lines()
        .filter_map(|l| l.strip_prefix("rootfence: refused system call: "))
        .map(|l| l.split(" (").next().unwrap_or(l).to_string())
        .collect()
}

/// What the default policy refuses on purpose, which runtimes try and do
/// without: unix sockets (Landlock cannot rule on them before ABI 9, and
/// the policy does not allow them; glibc asks nscd through one).
const BY_POLICY: &[&str] = &[
    "socket(AF_UNIX, SOCK_STREAM, 0)",
    "socket(AF_UNIX, SOCK_DGRAM, 0)",
];

/// What is refused on purpose without the view only: owners and extended
/// attributes (a server running as root owns every file it may read, and
/// without read-only mounts nothing else protects their metadata).
const WITHOUT_THE_VIEW: &[&str] = &[
    "fchown",
    "fchownat",
    "lchown",
    "chown",
    "fsetxattr",
    "setxattr",
    "lsetxattr",
];

/// The workload ran to its end.
fn finished(what: &str, stdout: &str) {
    assert_eq!(
        stdout.lines().last(),
        Some("done"),
        "{what} stopped early:\n{stdout}"
    );
}

/// Nothing refused but what the policy refuses on purpose (and `also`).
fn nothing_refused(what: &str, stderr: &str, also: &[&str]) {
    let got = refused(stderr);
    let no_view = what.ends_with("without namespaces");
    let unexpected: Vec<&String> = got
        .iter()
        .filter(|c| {
            let c = c.as_str();
            let expected = BY_POLICY.contains(&c)
                || also.contains(&c)
                || (no_view && WITHOUT_THE_VIEW.contains(&c));
            !expected
        })
        .collect();
    assert!(
        unexpected.is_empty()
            && (!got.is_empty() || stderr.contains("rootfence: no system call was refused")),
        "{what}: the allow-list refused {unexpected:?}\n{stderr}"
    );
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn each_mode(f: impl Fn(&Run, &str)) {
    for namespaces in [true, false] {
        let run = Run::new(namespaces);
        f(
            &run,
            if namespaces {
                "with namespaces"
            } else {
                "without namespaces"
            },
        );
    }
}

#[test]
fn a_shell_works_with_nothing_refused() {
    let bash = need("/usr/bin/bash", "apt-get install -y bash");
    each_mode(|r, mode| {
        let (out, err) = r.workload(
            &[bash.to_str().unwrap(), &script("shell.sh"), "{root}"],
            None,
            &[],
            &[],
        );
        finished(&format!("bash {mode}"), &out);
        nothing_refused(&format!("bash {mode}"), &err, &[]);
    });
}

#[test]
fn git_works_with_nothing_refused() {
    let bash = need("/usr/bin/bash", "apt-get install -y bash");
    each_mode(|r, mode| {
        let (out, err) = r.workload(
            &[bash.to_str().unwrap(), &script("git.sh"), "{root}"],
            None,
            &[],
            &[],
        );
        finished(&format!("git {mode}"), &out);
        nothing_refused(&format!("git {mode}"), &err, &[]);
    });
}

#[test]
fn node_works_with_nothing_refused() {
    let node = need("/usr/bin/node", "apt-get install -y nodejs");
    each_mode(|r, mode| {
        let (out, err) = r.workload(
            &[
                node.to_str().unwrap(),
                &script("node.js"),
                "{root}",
                "{port}",
            ],
            Some(free_port()),
            &[],
            &[],
        );
        finished(&format!("node {mode}"), &out);
        nothing_refused(&format!("node {mode}"), &err, &[]);
    });
}

#[test]
fn python_works_with_nothing_refused() {
    let py = common::python();
    each_mode(|r, mode| {
        let (out, err) = r.workload(
            &[
                py.to_str().unwrap(),
                &script("python.py"),
                "{root}",
                "{port}",
            ],
            Some(free_port()),
            &[],
            &[],
        );
        finished(&format!("python {mode}"), &out);
        nothing_refused(&format!("python {mode}"), &err, &[]);
    });
}

#[test]
fn uv_works_with_nothing_refused_but_its_world_writable_lock_without_the_view() {
    let peers = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers");
    let uv = need(
        peers.join(".venv/bin/uv").to_str().unwrap(),
        "run tests/peers/install.sh (scripts/test.sh does)",
    );
    let uv = uv.to_str().unwrap();
    let cache = peers.join(".uv-cache");
    let env = [("UV_CACHE_DIR", cache.to_str().unwrap())];
    let venv: &[&str] = &[
        uv,
        "venv",
        "-q",
        "{root}/venv",
        "--python",
        "/usr/bin/python3",
        "--offline",
    ];
    let python = "{root}/venv/bin/python";
    // With the view, uv installs from the shared cache through a private
    // layer. Without it a named cache cannot be a private layer: uv gets an
    // empty cache of its own and has nothing to install offline, so it
    // makes the venv and lists it.
    let install: &[&str] = &[
        uv,
        "pip",
        "install",
        "-q",
        "--offline",
        "--python",
        python,
        "idna",
        "click",
    ];
    let list: &[&str] = &[uv, "pip", "list", "--python", python];
    for (r, mode, steps, import) in [
        (
            Run::new(true),
            "with namespaces",
            [venv, install],
            "import idna, click; print('done')",
        ),
        (
            Run::new(false),
            "without namespaces",
            [venv, list],
            "import json; print('done')",
        ),
    ] {
        // uv makes its cache's lock files world-writable (fchmod 0666):
        // refused without the view, where world-writable modes are refused
        // everywhere (a server running as root owns every file it may
        // read); uv goes on without it.
        let also: &[&str] = if mode == "without namespaces" {
            &["fchmod(arg1=0o666)"]
        } else {
            &[]
        };
        for argv in steps {
            let (_, err) = r.workload(argv, None, &env, &[]);
            nothing_refused(&format!("{argv:?} {mode}"), &err, also);
        }
        let (out, err) = r.workload(&[python, "-c", import], None, &[], &[]);
        finished(&format!("the venv's python {mode}"), &out);
        nothing_refused(&format!("the venv's python {mode}"), &err, &[]);
    }
}
