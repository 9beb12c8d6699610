//! Where rootfence's users' hosts run: `exec` and `run` under seccomp
//! filters that reproduce each environment's rules
//! (`tests/peers/bin/rootfence-envfilter`), under `unshare -r` and as an
//! unprivileged user:
//!
//! - Docker's default profile (also Flatpak's and Chromium's sandboxes):
//!   `clone3` answers `ENOSYS`, namespaces and mounts are refused;
//! - Ubuntu's AppArmor restriction: a user namespace holds no capability
//!   (mounts denied with `EACCES`);
//! - a kernel without Landlock;
//! - a kernel or sandbox that refuses network namespaces only.
//!
//! Each works at the best rung it allows, or refuses with a message that
//! names what is missing and the way out; network by domain
//! (`allow_domains`) too, in the design each allows. And a server that
//! launches another server through rootfence (nested in rootfence itself).

use crate::common;
use crate::net_support;

use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::Stdio;

use common::{SECRET, Tree, envfilter, for_others, python, stderr};

const FULL: &str = "full (Landlock, seccomp, namespaces with the filesystem view)";
const LANDLOCK_SECCOMP: &str = "Landlock + seccomp (no namespaces)";
const VIEW_SECCOMP: &str = "view + seccomp (namespaces with the filesystem view, no Landlock)";

/// Who runs rootfence.
#[derive(Debug, Clone, Copy)]
enum Who {
    /// Root, in a user namespace of its own (`unshare -r`).
    RootUnshared,
    /// The unprivileged test user.
    User,
    /// The unprivileged test user, in a user namespace of its own where it
    /// is root (`unshare -r`).
    UserUnshared,
}

const EVERYONE: [Who; 3] = [Who::RootUnshared, Who::User, Who::UserUnshared];

/// A tree whose rootfence runs under the filter `modes` (comma-separated
/// `docker`, `apparmor`, `no-landlock`), started by `who`.
fn tree(modes: &str, who: Who) -> Tree {
    let mut t = match who {
        Who::RootUnshared => Tree::new(),
        Who::User | Who::UserUnshared => Tree::unprivileged(true),
    };
    if matches!(who, Who::RootUnshared | Who::UserUnshared) {
        t.wrapper = vec!["unshare".into(), "-r".into()];
    }
    t.wrapper.extend([
        for_others(Path::new(&envfilter())),
        modes.into(),
        "--".into(),
    ]);
    t
}

/// The confinement probe: a file in the root is read and one written, the
/// secret outside (which exists: the tree made it) is refused.
const PROBE: &str = "check('inside', lambda: read(os.environ['R'] + '/inside'))\n\
                     check('write', lambda: write(os.environ['R'] + '/new'))\n\
                     check('outside', lambda p: read(p), path=os.environ['O'] + '/secret')";

/// `exec` works under `t`'s environment at `rung`, confined.
fn exec_works(t: &Tree, rung: &str) {
    let policy = t.policy("p.toml", "version = 1\n");
    let mut c = t.command(
        &[
            "--log", "info", "--policy", &policy, "--env", "R", "--env", "O",
        ],
        &[
            python().to_str().unwrap(),
            "-c",
            &format!("{}\n{PROBE}", common::PRELUDE),
        ],
    );
    c.env("R", &t.r).env("O", &t.outside);
    let p = common::Probe::new(c.output().unwrap());
    p.success()
        .expect("inside", "OK")
        .expect("write", "OK")
        .refused("outside");
    let err = stderr(&p.out);
    assert!(
        err.contains(&format!(": {rung}: ")),
        "not at {rung}:\n{err}"
    );
    assert_eq!(common::content(&t.outside.join("secret")), SECRET);
}

/// `exec` refuses to start under `t`'s environment with `policy`, saying
/// every one of `says`; nothing runs.
fn exec_refuses(t: &Tree, policy: &str, says: &[&str]) {
    let policy = t.policy("refuse.toml", policy);
    let out = t.run(&["--policy", &policy], &["/bin/sh", "-c", "echo ran"]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(125), "{err}");
    assert!(!common::stdout(&out).contains("ran"), "it ran:\n{err}");
    for s in says {
        assert!(err.contains(s), "{s:?} not said:\n{err}");
    }
}

/// An MCP session through `rootfence run` under `t`'s environment: the
/// fake server reads a file of its root, is refused the secret outside,
/// and runs at `rung`.
fn run_works(t: &Tree, rung: &str) {
    let policy = t.policy("p.toml", "version = 1\n");
    let mut c = t.rootfence_command();
    c.args(["--log", "info", "run", "--policy", &policy, "--root"])
        .arg(&t.r)
        .arg("--")
        .arg(for_others(&common::fake_server()))
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", &t.home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    t.as_runner(&mut c);
    let mut child = c.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut ask = |line: String| {
        writeln!(stdin, "{line}").unwrap();
        let mut answer = String::new();
        stdout.read_line(&mut answer).unwrap();
        answer
    };
    let init = ask(r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#.into());
    assert!(init.contains("\"result\""), "{init}");
    let read = |id: u32, path: &Path| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"read","arguments":{{"path":"{}"}}}}}}"#,
            path.display()
        )
    };
    let inside = ask(read(2, &t.r.join("inside")));
    assert!(inside.contains("\"text\":\"inside\""), "{inside}");
    let outside = ask(read(3, &t.outside.join("secret")));
    assert!(
        outside.contains("error:") && !outside.contains(SECRET),
        "{outside}"
    );
    drop(stdin);
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(child.wait().unwrap().success(), "{err}");
    assert!(
        err.contains(&format!(": {rung}: ")),
        "not at {rung}:\n{err}"
    );
}

/// Run `case` in a tree under the filter `modes`, for each of those who
/// start rootfence ([`EVERYONE`]).
fn for_everyone(modes: &str, case: impl Fn(&Tree)) {
    for who in EVERYONE {
        case(&tree(modes, who));
    }
}

#[test]
fn docker_exec_runs_on_landlock_and_seccomp() {
    for_everyone("docker", |t| exec_works(t, LANDLOCK_SECCOMP));
}

#[test]
fn docker_run_serves_a_session_on_landlock_and_seccomp() {
    for_everyone("docker", |t| run_works(t, LANDLOCK_SECCOMP));
}

#[test]
fn docker_with_namespaces_required_refuses_and_says_why() {
    for_everyone("docker", |t| {
        exec_refuses(
            t,
            "version = 1\n[isolation]\nnamespaces = \"require\"\n",
            &[
                "[isolation] namespaces = \"require\"",
                "new namespaces were refused",
                "seccomp",
            ],
        );
    });
}

#[test]
fn a_refusal_is_remembered_for_the_boot_and_said_yet_never_taken_where_namespaces_are_required() {
    // The record is keyed by rootfence's user namespace among the rest:
    // under `unshare -r` each start is in a new one, and remembers nothing.
    let mut filtered = tree("docker", Who::User);
    let t = &filtered;
    // The first launch finds the refusal by trying; the next starts on
    // the rung it leaves, and says why.
    exec_works(t, LANDLOCK_SECCOMP);
    let out = t.run(&["--log", "info"], &["/bin/sh", "-c", "echo ran"]);
    let err = stderr(&out);
    assert!(out.status.success(), "{err}");
    assert!(common::stdout(&out).contains("ran"), "{err}");
    assert!(
        err.contains("WITHOUT namespaces (remembered for this boot: "),
        "not said:\n{err}"
    );
    assert!(
        err.contains(&format!(": {LANDLOCK_SECCOMP}: ")),
        "not at {LANDLOCK_SECCOMP}:\n{err}"
    );
    // Required namespaces: tried again, and refused as before.
    exec_refuses(
        t,
        "version = 1\n[isolation]\nnamespaces = \"require\"\n",
        &[
            "[isolation] namespaces = \"require\"",
            "new namespaces were refused",
        ],
    );
    // Without the filter (rootfence's environment changed), the same user
    // and home get the full rung: the record is not this environment's.
    filtered.wrapper.clear();
    exec_works(&filtered, FULL);
}

#[test]
fn apparmor_restriction_exec_runs_on_landlock_and_seccomp() {
    for_everyone("apparmor", |t| exec_works(t, LANDLOCK_SECCOMP));
}

#[test]
fn apparmor_restriction_run_serves_a_session_on_landlock_and_seccomp() {
    for_everyone("apparmor", |t| run_works(t, LANDLOCK_SECCOMP));
}

#[test]
fn apparmor_restriction_with_namespaces_required_names_the_profile() {
    for_everyone("apparmor", |t| {
        exec_refuses(
            t,
            "version = 1\n[isolation]\nnamespaces = \"require\"\n",
            &[
                "[isolation] namespaces = \"require\"",
                "AppArmor",
                "rootfence doctor --apparmor",
            ],
        );
    });
}

#[test]
fn without_landlock_exec_refuses_unless_the_policy_accepts_the_view() {
    for who in EVERYONE {
        let t = tree("no-landlock", who);
        // The default: fail closed, naming Landlock and the way out.
        let policy = t.p("default.toml");
        std::fs::write(&policy, "version = 1\n").unwrap();
        let out = t.run(
            &["--policy", policy.to_str().unwrap()],
            &["/bin/sh", "-c", "echo ran"],
        );
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(125), "{err}");
        assert!(!common::stdout(&out).contains("ran"), "{err}");
        assert!(
            err.contains("built without Landlock") && err.contains("landlock = \"prefer\""),
            "{err}"
        );
        // Accepted by the policy: the view and seccomp confine.
        exec_works(&t, VIEW_SECCOMP);
    }
}

#[test]
fn without_landlock_run_serves_a_session_on_the_view() {
    for_everyone("no-landlock", |t| run_works(t, VIEW_SECCOMP));
}

#[test]
fn without_landlock_or_namespaces_nothing_starts_and_both_are_named() {
    for who in EVERYONE {
        // (The tree's policies say landlock = "prefer".)
        exec_refuses(
            &tree("no-landlock,docker", who),
            "version = 1\n",
            &[
                "built without Landlock",
                "view + seccomp rung",
                "needs namespaces",
                "new namespaces were refused",
            ],
        );
    }
}

#[test]
fn unshared_and_unprivileged_without_a_filter_get_the_full_rung() {
    for who in EVERYONE {
        let mut t = tree("docker", who);
        // No filter: the wrapper without its envfilter part.
        t.wrapper.truncate(match who {
            Who::User => 0,
            _ => 2,
        });
        exec_works(&t, FULL);
    }
}

/// `doctor` under each environment states the rung in the README's words.
#[test]
fn doctor_states_the_rung_of_each_environment() {
    for (modes, policy, rung) in [
        ("docker", "version = 1\n", LANDLOCK_SECCOMP),
        ("apparmor", "version = 1\n", LANDLOCK_SECCOMP),
        (
            "no-landlock",
            "version = 1\n[isolation]\nlandlock = \"prefer\"\n",
            VIEW_SECCOMP,
        ),
        ("no-landlock", "version = 1\n", "NONE"),
        // The view + seccomp rung makes a network namespace too.
        (
            "no-landlock,no-netns",
            "version = 1\n[isolation]\nlandlock = \"prefer\"\n",
            "NONE",
        ),
        ("no-netns", "version = 1\n", FULL),
    ] {
        let t = tree(modes, Who::User);
        let p = t.p("doctor.toml");
        std::fs::write(&p, policy).unwrap();
        let mut c = t.rootfence_command();
        c.args(["doctor", "--policy"]).arg(&p);
        t.as_runner(&mut c);
        let out = c.output().unwrap();
        let text = common::stdout(&out);
        assert!(text.contains(&format!("rung: {rung}")), "{modes}: {text}");
        assert_eq!(out.status.success(), rung != "NONE", "{modes}: {text}");
    }
}

#[test]
fn a_server_launching_a_server_through_rootfence_gets_the_best_rung_left() {
    // The outer rootfence's filter refuses namespaces and clone3 to its
    // server; the inner rootfence falls back to clone and confines its own
    // server with Landlock and seccomp, inside the outer sandbox.
    for t in [Tree::new(), Tree::unprivileged(true)] {
        let inner = t.r.join("inner");
        std::fs::create_dir_all(&inner).unwrap();
        std::fs::write(inner.join("inside"), "inside").unwrap();
        let rf = t.rootfence();
        let mut c = t.command(
            &["--env", "R", "--env", "O"],
            &[
                &rf,
                "--log",
                "info",
                "exec",
                "--root",
                inner.to_str().unwrap(),
                "--env",
                "R",
                "--env",
                "O",
                "--",
                python().to_str().unwrap(),
                "-c",
                &format!("{}\n{PROBE}", common::PRELUDE),
            ],
        );
        // The inner server's root is the inner directory; outside it, the
        // outer root's own file (which the outer server may read).
        c.env("R", &inner).env("O", &t.r);
        std::fs::write(t.r.join("secret"), SECRET).unwrap();
        t.as_runner(&mut c);
        let p = common::Probe::new(c.output().unwrap());
        p.success()
            .expect("inside", "OK")
            .expect("write", "OK")
            .refused("outside");
        let err = stderr(&p.out);
        assert!(
            err.contains(&format!(": {LANDLOCK_SECCOMP}: ")),
            "the inner server is not at {LANDLOCK_SECCOMP}:\n{err}"
        );
    }
}

/// `explain` says the rung this machine gives and what the missing layers
/// leave open, in the README's words.
#[test]
fn explain_states_the_rung_and_what_it_leaves_open() {
    let t = tree("docker", Who::User);
    let mut c = t.rootfence_command();
    c.args(["explain", "--root"])
        .arg(&t.r)
        .args(["--", "/bin/true"]);
    t.as_runner(&mut c);
    let out = c.output().unwrap();
    let text = common::stdout(&out);
    assert!(
        text.contains(&format!("rung: {LANDLOCK_SECCOMP}")),
        "{text}"
    );
    assert!(
        text.contains(
            "leaves open: existence and names of files outside the roots (stat, inotify)"
        ),
        "{text}"
    );
    assert!(
        text.contains("leaves partly: processes outliving the server"),
        "{text}"
    );
}

/// Where user namespaces are refused (`user.max_user_namespaces = 0`),
/// root still makes the others (it needs no user namespace for them):
/// doctor and the launch agree on the full rung; another user gets
/// Landlock and seccomp.
#[test]
fn without_user_namespaces_root_keeps_the_view_and_doctor_agrees() {
    for (t, rung) in [
        (tree("no-userns", Who::User), LANDLOCK_SECCOMP),
        (
            {
                let mut t = Tree::new();
                t.wrapper = vec![envfilter(), "no-userns".into(), "--".into()];
                t
            },
            FULL,
        ),
    ] {
        exec_works(&t, rung);
        let mut c = t.rootfence_command();
        c.arg("doctor");
        t.as_runner(&mut c);
        let text = common::stdout(&c.output().unwrap());
        assert!(text.contains(&format!("rung: {rung}")), "{text}");
    }
}

/// How network by domain is held, as `--log info` says at start.
const IN_NETNS: &str = "(in the server's own network namespace, which holds nothing else)";
const SUPERVISED: &str = "(on rootfence's loopback; the server's connect() judged by rootfence)";

/// Under `t`'s environment, a server listing a site's name reaches it
/// through rootfence's proxy, at `rung` and in the design `design`; its
/// direct connection to the site's address, another name and UDP are
/// refused, judged at the site.
fn domains_work(t: &Tree, rung: &str, design: &str) {
    let s = net_support::Site::start(&t.p("site-files"), &t.ro, &["site.test"]);
    let h = s.http;
    let policy = t.policy("net.toml", &s.policy(&["site.test"], &[]));
    let code = format!(
        "{}\nimport urllib.request\n\
         def fetch(url):\n\
         \x20   try:\n\
         \x20       return str(urllib.request.urlopen(url, timeout=20).status)\n\
         \x20   except OSError as e:\n\
         \x20       return '403' if '403' in str(e) else str(e)\n\
         print('proxied=' + fetch('http://site.test:{h}/hello/proxied'), flush=True)\n\
         print('other=' + fetch('http://other.test/hello/other'), flush=True)\n\
         def direct():\n\
         \x20   c = socket.create_connection(('127.0.0.2', {h}), timeout=5)\n\
         \x20   c.sendall(b'GET /hello/direct HTTP/1.0\\r\\n\\r\\n')\n\
         \x20   c.recv(100)\n\
         check('direct', direct)\n\
         check('udp', lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM))\n\
         check('tcp', lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM))\n\
         {}",
        common::PRELUDE,
        s.via_proxy_check("via_proxy", "site.test", "/hello/via-proxy")
    );
    let out = t
        .command(
            &["--log", "info", "--policy", &policy],
            &[python().to_str().unwrap(), "-c", &code],
        )
        .output()
        .unwrap();
    let p = common::Probe::new(out);
    p.success()
        .allowed_with("proxied", "200")
        .expect("other", "403")
        .expect("udp", "EPERM")
        .expect_any(
            "direct",
            &["EACCES", "EPERM", "ENETUNREACH", "ECONNREFUSED"],
        )
        // The same socket() and connection, to rootfence's proxy.
        .allowed("tcp")
        .allowed("via_proxy");
    let err = stderr(&p.out);
    assert!(
        err.contains(&format!(": {rung}: ")),
        "not at {rung}:\n{err}"
    );
    assert!(err.contains(design), "not {design}:\n{err}");
    assert!(s.saw("/hello/proxied") && s.saw("/hello/via-proxy"));
    assert!(!s.saw("/hello/direct"), "{:?}", s.requests());
}

#[test]
fn docker_holds_domains_by_supervised_connect() {
    // No namespaces at all: the supervised design (this kernel has
    // Landlock ABI 4).
    for_everyone("docker", |t| domains_work(t, LANDLOCK_SECCOMP, SUPERVISED));
}

#[test]
fn without_landlock_domains_are_held_by_the_network_namespace() {
    // The view + seccomp rung has no Landlock to rule on ports: only the
    // server's own network namespace keeps it to the proxy.
    for_everyone("no-landlock", |t| domains_work(t, VIEW_SECCOMP, IN_NETNS));
}

#[test]
fn where_network_namespaces_alone_are_refused_the_view_stays_and_connect_is_supervised() {
    for_everyone("no-netns", |t| domains_work(t, FULL, SUPERVISED));
}

#[test]
fn where_neither_design_holds_domains_refuse_to_start_and_say_why() {
    // No Landlock, and no network namespace: the view + seccomp rung
    // cannot keep a server to the proxy (its other namespaces would do
    // for the view), and a Docker profile on a kernel without Landlock
    // gives no namespace at all.
    for (modes, says) in [
        (
            "no-landlock,no-netns",
            &[
                "[network] allow_domains on the view + seccomp rung (no Landlock) needs a network namespace of the server's own",
                "refused a new network namespace",
                "Landlock ABI 4",
            ][..],
        ),
        (
            "no-landlock,docker",
            &[
                "[network] allow_domains on the view + seccomp rung (no Landlock) needs a network namespace of the server's own",
                "seccomp",
                "Landlock ABI 4",
            ][..],
        ),
    ] {
        for who in EVERYONE {
            exec_refuses(
                &tree(modes, who),
                "version = 1\n[network]\nallow_domains = [\"site.test\"]\n",
                says,
            );
        }
    }
}

/// `doctor` says how each environment holds network by domain.
#[test]
fn doctor_states_the_design_for_domains_in_each_environment() {
    for (modes, policy, says) in [
        (
            "docker",
            "version = 1\n",
            "network by domain ([network] allow_domains): on rootfence's loopback",
        ),
        (
            "no-netns",
            "version = 1\n",
            "network by domain ([network] allow_domains): on rootfence's loopback",
        ),
        (
            "no-landlock",
            "version = 1\n[isolation]\nlandlock = \"prefer\"\n",
            "network by domain ([network] allow_domains): in the server's own network namespace",
        ),
        (
            "no-landlock,no-netns",
            "version = 1\n[isolation]\nlandlock = \"prefer\"\n",
            "network by domain ([network] allow_domains): NOT POSSIBLE here: [network] allow_domains on the view + seccomp rung",
        ),
    ] {
        let t = tree(modes, Who::User);
        let p = t.p("doctor.toml");
        std::fs::write(&p, policy).unwrap();
        let mut c = t.rootfence_command();
        c.args(["doctor", "--policy"]).arg(&p);
        t.as_runner(&mut c);
        let text = common::stdout(&c.output().unwrap());
        assert!(text.contains(says), "{modes}: {text}");
    }
}

/// A tree whose rootfence runs inside bubblewrap (the sandbox agents and
/// editors put their tools in), with bwrap's `extra` options, started by
/// root or by the unprivileged user.
fn in_bubblewrap(extra: &[&str], user: bool) -> Tree {
    let mut t = if user {
        Tree::unprivileged(true)
    } else {
        Tree::new()
    };
    t.wrapper = ["bwrap", "--dev-bind", "/", "/", "--proc", "/proc"]
        .iter()
        .chain(extra)
        .map(|s| s.to_string())
        .chain(["--".to_string()])
        .collect();
    t
}

#[test]
fn inside_bubblewrap_exec_and_run_get_the_full_rung() {
    // bwrap's own user, PID and IPC namespaces: rootfence makes its
    // server's inside them.
    for user in [false, true] {
        let t = in_bubblewrap(&["--unshare-user", "--unshare-pid", "--unshare-ipc"], user);
        exec_works(&t, FULL);
        run_works(&t, FULL);
    }
}

#[test]
fn inside_bubblewrap_without_nested_user_namespaces_exec_runs_on_landlock_and_seccomp() {
    // `--disable-userns`: no user namespace may be made inside (as in
    // Flatpak): Landlock and seccomp hold.
    for user in [false, true] {
        let t = in_bubblewrap(&["--unshare-user", "--disable-userns"], user);
        exec_works(&t, LANDLOCK_SECCOMP);
    }
}

#[test]
fn inside_bubblewrap_domains_are_held_by_the_design_of_the_rung() {
    for user in [false, true] {
        domains_work(
            &in_bubblewrap(&["--unshare-user", "--unshare-pid", "--unshare-ipc"], user),
            FULL,
            IN_NETNS,
        );
        domains_work(
            &in_bubblewrap(&["--unshare-user", "--disable-userns"], user),
            LANDLOCK_SECCOMP,
            SUPERVISED,
        );
    }
}
