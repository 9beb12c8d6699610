// The cases of the `escapes_proc` suites, included by tests/escapes/main.rs
// in each mode: `proc` (the server in its own namespaces), `proc_no_ns`
// (without), `proc_user` (both, run by an unprivileged user) and
// `proc_no_landlock` (the view + seccomp rung).


use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{SECRET, Tree, python, stderr, stdout};

// The entries of /proc the server is refused are those of living
// processes (its parent, pid 1): every process has them. Where the server
// gets `ENOENT` (in its own /proc a process it may not trace is hidden),
// the check names the same entry of the test's own process, which the
// test sees outside, and reaches the parent's through it (`theirs`).

#[test]
fn proc_of_the_parent_gives_no_descriptors() {
    let t = tree();
    t.py(
        &[],
        "pp = os.getppid()\n\
         theirs = lambda p: p.replace('/proc/self/', f'/proc/{pp}/', 1)\n\
         check('list', lambda p: os.listdir(theirs(p)), path='/proc/self/fd')\n\
         check('open', lambda p: os.open(theirs(p) + '/0', os.O_RDONLY), path='/proc/self/fd')\n\
         check('own', lambda: os.listdir('/proc/self/fd'))\n\
         check('own_open', lambda: os.open('/proc/self/fd/0', os.O_RDONLY))",
    )
    .refused("list")
    .refused("open")
    .allowed("own")
    .allowed("own_open");
}

#[test]
fn proc_of_the_parent_gives_no_cwd() {
    // The parent, rootfence, runs in the tree's base (`Tree::command`).
    let t = tree();
    t.py(
        &[],
        &format!(
            "pp = os.getppid()\n\
             at_cwd = lambda p: f'/proc/{{pp}}/cwd' + p[len('{base}'):]\n\
             check('list', lambda p: os.listdir(at_cwd(p)), path='{base}')\n\
             check('read', lambda p: read(at_cwd(p)), path='{base}/outside/secret')\n\
             inside = os.path.relpath('{r}/inside', os.getcwd())\n\
             check('own', lambda: read('/proc/self/cwd/' + inside))",
            base = t.base.display(),
            r = t.r.display()
        ),
    )
    .refused("list")
    .refused("read")
    // Its own working directory leads to a file in its root.
    .allowed("own");
}

#[test]
fn proc_of_the_parent_gives_no_root() {
    let t = tree();
    t.py(
        &[],
        &format!(
            "pp = os.getppid()\n\
             check('read', lambda p: read(f'/proc/{{pp}}/root' + p), path='{o}/secret')\n\
             check('list', lambda p: os.listdir(f'/proc/{{pp}}/root' + p), path='/')\n\
             check('own', lambda: read('/proc/self/root{r}/inside'))",
            o = t.outside.display(),
            r = t.r.display()
        ),
    )
    .refused("read")
    .refused("list")
    // Its own root leads to a file in its root.
    .allowed("own");
}

#[test]
fn proc_of_the_parent_gives_no_environment() {
    let t = tree();
    let out = t
        .command_inherited(
            &[],
            &[
                python().to_str().unwrap(),
                "-c",
                &format!(
                    "{}\ntheirs = lambda p: p.replace('/proc/self/', f'/proc/{{os.getppid()}}/', 1)\n\
                     check('environ', lambda p: read(theirs(p)), path='/proc/self/environ')\n\
                     check('cmdline_mem', lambda p: open(theirs(p), 'rb'), path='/proc/self/mem')\n\
                     check('own_environ', lambda: read('/proc/self/environ'))\n\
                     check('own_mem', lambda: open('/proc/self/mem', 'rb'))",
                    common::PRELUDE
                ),
            ],
        )
        .env("PARENT_SECRET", SECRET)
        .output()
        .unwrap();
    assert!(!stdout(&out).contains(SECRET));
    common::Probe::new(out)
        .refused("environ")
        .refused("cmdline_mem")
        .allowed("own_environ")
        .allowed("own_mem");
}

#[test]
fn proc_of_unrelated_processes_is_closed() {
    let t = tree();
    let p = t.py(
        &[],
        "check('init_environ', lambda p: read(p), path='/proc/1/environ')\n\
         check('init_root', lambda p: os.listdir(p), path='/proc/1/root')\n\
         check('own_environ', lambda: read('/proc/self/environ'))\n\
         check('proc_list', lambda: os.listdir('/proc'))\n\
         pids = sorted(int(p) for p in os.listdir('/proc') if p.isdigit()) if os.access('/proc', os.R_OK) else []\n\
         print('others=' + str([p for p in pids if p != os.getpid()]))",
    );
    p.refused("init_environ")
        .refused("init_root")
        .allowed("own_environ");
    if t.namespaces {
        // Its own /proc lists its own processes only.
        p.expect("proc_list", "OK").expect("others", "[]");
    } else {
        p.refused("proc_list");
    }
}

/// `sh -c 'exec 7<secret; exec rootfence exec -- <argv>'`: whoever starts
/// rootfence leaks descriptor 7 to it.
fn with_leaked_fd(t: &Tree, argv: &str) -> std::process::Output {
    let rf: Vec<String> = t
        .rootfence_argv()
        .into_iter()
        .chain(t.exec_args())
        .map(|a| format!("'{a}'"))
        .collect();
    let script = format!(
        "exec 7<'{secret}'; exec {rf} --root '{r}' -- {argv}",
        secret = t.outside.join("secret").display(),
        rf = rf.join(" "),
        r = t.r.display()
    );
    t.as_runner(
        Command::new("/bin/sh")
            .arg("-c")
            .arg(script)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", &t.home),
    )
    .output()
    .unwrap()
}

#[test]
fn descriptor_leaked_by_the_caller_is_closed_for_redirection() {
    let t = tree();
    // Counterpart: without rootfence, the descriptor is readable.
    let direct = Command::new("/bin/sh")
        .arg("-c")
        .arg(format!(
            "exec 7<'{}'; /bin/sh -c 'cat <&7'",
            t.outside.join("secret").display()
        ))
        .output()
        .unwrap();
    assert_eq!(stdout(&direct), SECRET);
    let out = with_leaked_fd(&t, "/bin/sh -c 'cat <&7'");
    assert!(!stdout(&out).contains(SECRET));
    assert!(
        stderr(&out).contains("Bad file descriptor"),
        "{}",
        stderr(&out)
    );
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn descriptor_leaked_by_the_caller_is_absent_from_proc_self_fd() {
    let t = tree();
    let out = with_leaked_fd(
        &t,
        &format!(
            "{} -c \"import os; print(sorted(os.listdir('/proc/self/fd'))); open('/proc/self/fd/7').read()\"",
            python().display()
        ),
    );
    assert!(!stdout(&out).contains(SECRET));
    // Only 0, 1, 2 and the descriptor listdir itself opened.
    assert!(
        stdout(&out).contains("['0', '1', '2', '3']"),
        "{}",
        stdout(&out)
    );
    assert!(
        stderr(&out).contains("FileNotFoundError") && stderr(&out).contains("/proc/self/fd/7"),
        "{}",
        stderr(&out)
    );
}

fn copy_true_to(dir: &std::path::Path) -> String {
    let p = dir.join("true-copy");
    std::fs::copy("/bin/true", &p).unwrap();
    p.to_string_lossy().into_owned()
}

#[test]
fn binary_copied_into_a_root_cannot_be_executed() {
    let t = tree();
    let copy = copy_true_to(&t.r);
    t.py(
        &[],
        &format!(
            "import subprocess\n\
             check('exec_copy', lambda: subprocess.run(['{copy}']))\n\
             check('exec_system', lambda: subprocess.run(['/bin/true'], check=True))"
        ),
    )
    .refused("exec_copy")
    .expect("exec_system", "OK");
}

#[test]
fn binary_outside_the_roots_cannot_be_executed() {
    let t = tree();
    let copy = copy_true_to(&t.outside);
    let out = t.run(&[], &["/bin/sh", "-c", &format!("'{copy}'")]);
    // In the server's own view the outside does not exist (127, not
    // found); with Landlock alone it is there but not executable (126).
    let (code, why) = if t.namespaces {
        (127, "not found")
    } else {
        (126, "Permission denied")
    };
    assert_eq!(out.status.code(), Some(code), "{}", stderr(&out));
    assert!(stderr(&out).contains(why), "{}", stderr(&out));
    // The same exec of the system's copy works.
    let system = t.run(&[], &["/bin/sh", "-c", "'/bin/true'"]);
    assert_eq!(system.status.code(), Some(0), "{}", stderr(&system));
}

/// A signal to a process outside the sandbox: refused by Landlock's scope
/// (`EPERM`), or, in the server's own PID namespace, that process cannot
/// even be named (`ESRCH`).
const SIGNAL_REFUSED: &[&str] = &["EPERM", "ESRCH"];

#[test]
fn signalling_rootfence_is_refused() {
    let t = tree();
    if t.no_landlock() {
        return signals_reach_only_the_servers_namespace(&t);
    }
    t.py(
        &[],
        "check('term', lambda: os.kill(os.getppid(), signal.SIGTERM))\n\
         check('kill', lambda: os.kill(os.getppid(), signal.SIGKILL))\n\
         check('group', lambda: os.killpg(os.getpgid(os.getppid()), signal.SIGTERM))\n\
         import subprocess\n\
         own = subprocess.Popen(['sleep', '30'], start_new_session=True)\n\
         check('own_term', lambda: os.kill(own.pid, signal.SIGTERM))\n\
         check('own_group', lambda: os.killpg(own.pid, signal.SIGKILL))\n\
         own.wait()",
    )
    .success()
    .expect_any("term", SIGNAL_REFUSED)
    .expect_any("kill", SIGNAL_REFUSED)
    .expect_any("group", SIGNAL_REFUSED)
    // The same signals to its own child and the child's group.
    .allowed("own_term")
    .allowed("own_group");
}

/// Without Landlock's signal scope: rootfence cannot be named from the
/// server's PID namespace; its parent there is the namespace's init, which
/// passes the termination signals on to the server itself and ignores
/// `SIGKILL` (the kernel does not deliver it to an init from inside).
fn signals_reach_only_the_servers_namespace(t: &Tree) {
    let p = t.py(
        &[],
        "print('parent=%d' % os.getppid())\n\
         signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGTERM])\n\
         check('term', lambda: os.kill(os.getppid(), signal.SIGTERM))\n\
         info = signal.sigtimedwait([signal.SIGTERM], 10)\n\
         print('term_came_back_from=%d' % (info.si_pid if info else -1))\n\
         check('kill', lambda: os.kill(os.getppid(), signal.SIGKILL))\n\
         print('parent_after=%d' % os.getppid())",
    );
    p.success()
        .expect("parent", "1")
        .expect("term", "OK")
        .expect("term_came_back_from", "1")
        .expect("kill", "OK")
        .expect("parent_after", "1");
}

#[test]
fn signalling_an_unrelated_process_is_refused() {
    let t = tree();
    let mut sleeper = t.as_runner(Command::new("sleep").arg("30")).spawn().unwrap();
    let pid = sleeper.id();
    t.py(
        &[],
        &format!(
            "check('kill', lambda: os.kill({pid}, signal.SIGKILL))\n\
             check('stop', lambda: os.kill({pid}, signal.SIGSTOP))\n\
             import subprocess\n\
             own = subprocess.Popen(['sleep', '30'])\n\
             check('own_child', lambda: os.kill(own.pid, signal.SIGKILL))\n\
             own.wait()"
        ),
    )
    .expect_any("kill", SIGNAL_REFUSED)
    .expect_any("stop", SIGNAL_REFUSED)
    .expect("own_child", "OK");
    assert!(
        sleeper.try_wait().unwrap().is_none(),
        "the unrelated sleep died"
    );
    sleeper.kill().unwrap();
    sleeper.wait().unwrap();
}

#[test]
fn ptrace_of_the_parent_is_refused() {
    let t = tree();
    t.py(
        &[],
        "import ctypes\n\
         libc = ctypes.CDLL(None, use_errno=True)\n\
         def attach():\n\
         \x20   if libc.ptrace(16, os.getppid(), 0, 0) != 0:\n\
         \x20       raise OSError(ctypes.get_errno(), 'ptrace')\n\
         check('attach', attach)\n\
         check('own_memory', lambda: open('/proc/self/mem', 'rb'))",
    )
    .expect("attach", "EPERM")
    // ptrace is refused whole; what attaching would give, a process's
    // memory, is open for the server's own.
    .allowed("own_memory");
}

#[test]
fn no_new_privs_seccomp_and_no_capabilities() {
    let t = tree();
    let out = t.run(&[], &["/bin/cat", "/proc/self/status"]);
    let s = stdout(&out);
    let mut wants = vec![
        "NoNewPrivs:\t1",
        "Seccomp:\t2",
        "CapInh:\t0000000000000000",
        "CapPrm:\t0000000000000000",
        "CapEff:\t0000000000000000",
        "CapAmb:\t0000000000000000",
    ];
    // An unprivileged user cannot empty its bounding set without
    // namespaces (no CAP_SETPCAP), and needs not: a process that is not
    // root gets no capability at exec from it, and no_new_privs stops
    // set-id and file-capability programs.
    if t.namespaces || t.runner().0 == 0 {
        wants.push("CapBnd:\t0000000000000000");
    } else {
        assert!(!s.contains("Uid:\t0\t"), "the server runs as root:\n{s}");
    }
    for want in wants {
        assert!(s.contains(want), "{want} missing:\n{s}\n{}", stderr(&out));
    }
}

#[test]
fn privileged_operations_are_refused() {
    let t = tree();
    t.py(
        &[],
        "check('sethostname', lambda: socket.sethostname(socket.gethostname()))\n\
         check('setuid_root_to_nobody_and_back', lambda: (os.setresuid(65534, 65534, 0), os.setuid(0)))\n\
         check('setuid_self', lambda: os.setuid(os.getuid()))\n\
         import resource\n\
         check('core', lambda: resource.getrlimit(resource.RLIMIT_CORE) == (0, 0) or (_ for _ in ()).throw(OSError(errno.EINVAL, 'core')))",
    )
    .expect("sethostname", "EPERM")
    // In an unprivileged user's own user namespace, uid 65534 does not
    // exist there (EINVAL); elsewhere changing it is not permitted.
    .expect_any("setuid_root_to_nobody_and_back", &["EPERM", "EINVAL"])
    .expect("setuid_self", "OK")
    .expect("core", "OK");
}

/// Run `launcher` (python given rootfence's command line as its arguments,
/// which starts rootfence on a terminal) with `rootfence exec -- python -c
/// code`, as the tree's runner; its output.
fn on_a_terminal(t: &Tree, launcher: &str, code: &str) -> std::process::Output {
    t.as_runner(
        Command::new(python())
            .arg("-c")
            .arg(launcher)
            .args(t.rootfence_argv())
            .args(t.exec_args())
            .arg("--")
            .arg(python())
            .arg("-c")
            .arg(code)
            .env_clear()
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", &t.home),
    )
    .output()
    .unwrap()
}

#[test]
fn new_session_without_controlling_terminal_and_no_tiocsti() {
    let t = tree();
    let probe = format!(
        "{}\n\
         import fcntl, termios\n\
         st = read('/proc/self/stat').rsplit(')', 1)[1].split()\n\
         print('tty_nr=' + st[4])\n\
         print('session_leader=' + str(os.getsid(0) == os.getpid()))\n\
         print('init_leads=' + str(os.getsid(0) == 1))\n\
         check('tiocsti', lambda: fcntl.ioctl(0, termios.TIOCSTI, b'x'))\n\
         check('fionread', lambda: fcntl.ioctl(0, termios.FIONREAD, b'\\0\\0\\0\\0'))",
        common::PRELUDE
    );
    // The launcher gives rootfence a pty as its controlling terminal.
    let launcher = r#"
import os, pty, subprocess, sys, fcntl, termios
m, s = pty.openpty()
def ctty():
    fcntl.ioctl(0, termios.TIOCSCTTY, 0)
p = subprocess.run(sys.argv[1:], stdin=s, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                   start_new_session=True, preexec_fn=ctty)
sys.stdout.write(p.stdout.decode())
sys.stderr.write(p.stderr.decode())
os.set_blocking(m, False)
try:
    injected = os.read(m, 100)
except BlockingIOError:
    injected = b''
print('injected=' + repr(injected))
"#;
    let out = on_a_terminal(&t, launcher, &probe);
    let p = common::Probe::new(out);
    // A new session: the server's own, or with namespaces its init's.
    if t.namespaces {
        p.expect("init_leads", "True");
    } else {
        p.expect("session_leader", "True");
    }
    p.expect("tty_nr", "0")
        .expect("tiocsti", "EPERM")
        // Another ioctl on the same descriptor works.
        .allowed("fionread")
        .expect("injected", "b''");
}

#[test]
fn environment_is_exactly_the_plans() {
    // The host's own environment (inherited by rootfence) holds secrets:
    // none reaches the server.
    let t = tree();
    let out = t
        .command_inherited(&[], &["/usr/bin/env"])
        .env("AWS_SECRET_ACCESS_KEY", SECRET)
        .env("GITHUB_TOKEN", SECRET)
        .env("LD_PRELOAD", "/tmp/evil.so")
        .env("TERM", "xterm")
        .output()
        .unwrap();
    let env = stdout(&out);
    assert!(!env.contains(SECRET), "{env}");
    let mut names: Vec<&str> = env
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .collect();
    names.sort_unstable();
    // GIT_CONFIG_GLOBAL: git's configuration for the server (an empty
    // one here: the fake home has none). Without namespaces, the XDG
    // directories point into the server's own store.
    let mut want = vec!["GIT_CONFIG_GLOBAL", "HOME", "LANG", "PATH", "TERM", "TMPDIR"];
    if !t.namespaces {
        want.extend([
            "XDG_CACHE_HOME",
            "XDG_CONFIG_HOME",
            "XDG_DATA_HOME",
            "XDG_STATE_HOME",
        ]);
    }
    assert_eq!(names, want, "{env}");
    // What the host sets for this launch (a config's `env` block) passes,
    // but a variable that makes a runtime load code does not.
    let out = t
        .command_hosted(
            &[],
            &["/usr/bin/env"],
            &[
                ("GITHUB_TOKEN", "the-servers-own-token"),
                ("LD_PRELOAD", "/tmp/evil.so"),
            ],
        )
        .output()
        .unwrap();
    let env = stdout(&out);
    assert!(env.contains("GITHUB_TOKEN=the-servers-own-token"), "{env}");
    assert!(!env.contains("LD_PRELOAD"), "{env}");
}

#[test]
fn scratch_dir_is_private_usable_and_removed_at_exit() {
    let t = tree();
    let p = t.py(
        &[],
        "d = os.environ['TMPDIR']\n\
         print('tmpdir=' + d)\n\
         st = os.stat(d)\n\
         print('mode=' + oct(stat.S_IMODE(st.st_mode)))\n\
         print('owner_is_me=' + str(st.st_uid == os.getuid()))\n\
         import tempfile\n\
         check('tempfile', lambda: tempfile.NamedTemporaryFile(dir=None).write(b'x'))\n\
         check('parent_list', lambda: os.listdir(os.path.dirname(d)))\n\
         try:\n\
         \x20   print('parent_names=' + ','.join(sorted(os.listdir(os.path.dirname(d)))))\n\
         except OSError:\n\
         \x20   pass",
    );
    p.success()
        .expect("mode", "0o700")
        .expect("owner_is_me", "True")
        .expect("tempfile", "OK");
    let dir = p.value("tmpdir");
    if t.no_landlock() {
        // Without Landlock the directories of the view are listable, and
        // hold only the mount points of grants: the scratch directory and
        // the directory holding this tree's roots.
        p.expect("parent_list", "OK");
        let scratch = std::path::Path::new(&dir);
        let mut want = [
            scratch.file_name().unwrap().to_string_lossy().into_owned(),
            t.base.file_name().unwrap().to_string_lossy().into_owned(),
        ];
        want.sort();
        assert_eq!(p.value("parent_names"), want.join(","));
    } else {
        p.refused("parent_list");
    }
    assert!(dir.contains("rootfence-"), "{dir}");
    assert!(
        !std::path::Path::new(&dir).exists(),
        "{dir} was not removed"
    );
}

#[test]
fn scratch_dir_is_removed_when_the_server_is_killed() {
    let t = tree();
    let p = t.py(
        &[],
        "d = os.environ['TMPDIR']\n\
         open(d + '/leftover', 'w').write('x')\n\
         print('tmpdir=' + d, flush=True)\n\
         os.kill(os.getpid(), signal.SIGKILL)",
    );
    assert_eq!(p.out.status.code(), Some(128 + 9));
    let dir = p.value("tmpdir");
    assert!(!std::path::Path::new(&dir).exists(), "{dir} left behind");
}

#[test]
fn terminating_rootfence_stops_the_server_and_cleans_up() {
    let t = tree();
    let mut child = t
        .command(
            &[],
            &[
                python().to_str().unwrap(),
                "-c",
                "import os, time; print(os.environ['TMPDIR'], flush=True); time.sleep(60)",
            ],
        )
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = child.stdout.take().unwrap();
    let mut line = Vec::new();
    let mut b = [0u8; 1];
    while out.read(&mut b).unwrap() == 1 && b[0] != b'\n' {
        line.push(b[0]);
    }
    let dir = String::from_utf8(line).unwrap();
    assert!(std::path::Path::new(&dir).is_dir());
    let started = Instant::now();
    // SAFETY: kill with a valid pid of our own child.
    unsafe {
        libc::kill(child.id() as i32, libc::SIGTERM);
    }
    let status = child.wait().unwrap();
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(status.code(), Some(128 + 15), "the server's SIGTERM death");
    assert!(!std::path::Path::new(&dir).exists(), "{dir} left behind");
}

#[test]
fn exit_status_and_signal_death_pass_through() {
    let t = tree();
    assert_eq!(
        t.run(&[], &["/bin/sh", "-c", "exit 42"]).status.code(),
        Some(42)
    );
    assert_eq!(t.run(&[], &["/bin/true"]).status.code(), Some(0));
    assert_eq!(t.run(&[], &["/bin/false"]).status.code(), Some(1));
    assert_eq!(
        t.run(&[], &["/bin/sh", "-c", "kill -TERM $$"])
            .status
            .code(),
        Some(128 + 15)
    );
    assert_eq!(
        t.run(&[], &["/bin/sh", "-c", "kill -SEGV $$"])
            .status
            .code(),
        Some(128 + 11)
    );
}

#[test]
fn stdio_is_inherited() {
    let t = tree();
    let mut c = t.command(&[], &["/bin/cat"]);
    c.stdin(Stdio::piped()).stdout(Stdio::piped());
    let mut child = c.spawn().unwrap();
    use std::io::Write;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"through the sandbox\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(stdout(&out), "through the sandbox\n");
}

#[test]
fn missing_command_and_refused_root_fail_closed() {
    let t = tree();
    let out = t.run(&[], &["no-such-command-rootfence"]);
    assert_eq!(out.status.code(), Some(127), "{}", stderr(&out));
    assert!(stderr(&out).contains("not found"), "{}", stderr(&out));
    // A root inside a denied path is refused, and nothing runs.
    let out = t
        .as_runner(
            t.rootfence_command()
                .args(t.exec_args())
                .arg("--root")
                .arg(t.home.join(".ssh"))
                .args(["--", "/bin/echo", "ran"])
                .env_clear()
                .env("HOME", &t.home),
        )
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    assert!(stderr(&out).contains("refused"), "{}", stderr(&out));
    assert!(!stdout(&out).contains("ran"));
}

#[test]
fn missing_required_runtime_path_fails_closed() {
    let t = tree();
    let policy = t.policy(
        "missing.toml",
        "version = 1\n[runtime]\nread = [\"/nonexistent-rootfence-path\"]\n",
    );
    let out = t.run(&["--policy", &policy], &["/bin/echo", "ran"]);
    assert_eq!(out.status.code(), Some(125), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("/nonexistent-rootfence-path") && err.contains("does not exist"),
        "{err}"
    );
    assert!(!stdout(&out).contains("ran"));
}

#[test]
fn processes_left_behind_by_the_server_are_killed_with_it() {
    // A background job of the server: gone once rootfence has returned.
    let t = tree();
    let marker = format!("30.{}", common::unique());
    let out = t.run(
        &[],
        &[
            "/bin/sh",
            "-c",
            &format!("sleep {marker} </dev/null >/dev/null 2>&1 & echo started"),
        ],
    );
    assert_eq!(stdout(&out).trim(), "started", "{}", stderr(&out));
    assert_eq!(common::processes_with(&format!("sleep {marker}")), Vec::<u32>::new());
}

#[test]
fn a_daemon_that_double_forks_and_leaves_the_session_dies_with_the_server() {
    // fork, setsid, fork: the grandchild is outside the server's process
    // group and session and has no parent-death signal. It keeps writing in
    // the root; after rootfence returns it must be gone and the file must
    // stop growing.
    let t = tree();
    let marker = format!("rootfence-daemon-{}", common::unique());
    let log = t.r.join("daemon.log");
    let code = format!(
        "import os, sys, time\n\
         if os.fork() == 0:\n\
         \x20   os.setsid()\n\
         \x20   if os.fork() == 0:\n\
         \x20       n = os.open('/dev/null', os.O_RDWR)\n\
         \x20       for fd in (0, 1, 2):\n\
         \x20           os.dup2(n, fd)\n\
         \x20       os.execv(sys.executable, [sys.executable, '-c', \"import time\\nwhile True:\\n    open('{log}', 'a').write('x')\\n    time.sleep(0.02)\", '{marker}'])\n\
         \x20   os._exit(0)\n\
         time.sleep(0.3)\n\
         print('parent exits', flush=True)",
        log = log.display()
    );
    let out = t.run(&[], &[python().to_str().unwrap(), "-c", &code]);
    assert!(stdout(&out).contains("parent exits"), "{}", stderr(&out));
    let size = || std::fs::metadata(&log).map(|m| m.len()).unwrap_or(0);
    let first = size();
    assert!(first > 0, "the daemon ran and wrote while the server lived");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(size(), first, "the daemon kept writing after rootfence returned");
    assert_eq!(common::processes_with(&marker), Vec::<u32>::new());
}

#[test]
fn a_daemon_cannot_keep_the_terminal_after_rootfence_returns() {
    // The server starts a detached process that would print a fake prompt
    // and read the user's answer once rootfence has returned. It holds the
    // terminal only through rootfence's descriptors: once rootfence
    // returns it is gone, and nothing it wrote late reaches the terminal.
    let t = tree();
    let marker = format!("rootfence-prompt-{}", common::unique());
    let launcher = r#"
import os, pty, subprocess, sys, time
m, s = pty.openpty()
p = subprocess.Popen(sys.argv[1:], stdin=s, stdout=s, stderr=s, start_new_session=True)
os.close(s)
p.wait()
time.sleep(0.8)
os.set_blocking(m, False)
seen = b''
while True:
    try:
        chunk = os.read(m, 4096)
    except (BlockingIOError, OSError):
        break
    if not chunk:
        break
    seen += chunk
print('late_prompt=' + str(b'password' in seen))
print('early=' + str(b'early' in seen))
"#;
    let code = format!(
        "import os, sys, time\n\
         print('early', flush=True)\n\
         if os.fork() == 0:\n\
         \x20   os.setsid()\n\
         \x20   if os.fork() == 0:\n\
         \x20       os.execv(sys.executable, [sys.executable, '-c', \"import time, sys\\ntime.sleep(0.4)\\nsys.stdout.write('[sudo] password for you: ')\\nsys.stdout.flush()\\nsys.stdin.readline()\", '{marker}'])\n\
         \x20   os._exit(0)\n"
    );
    let out = on_a_terminal(&t, launcher, &code);
    let p = common::Probe::new(out);
    p.expect("early", "True").expect("late_prompt", "False");
    assert_eq!(common::processes_with(&marker), Vec::<u32>::new());
}

#[test]
fn limits_priority_and_scheduling_of_outside_processes_stay_theirs() {
    // Signals are scoped; limits, priority, affinity and I/O priority are
    // not, by Landlock: prlimit(RLIMIT_CPU, 1 s) on an outside process
    // would kill it.
    let t = tree();
    let mut victim = t.as_runner(Command::new("sleep").arg("30")).spawn().unwrap();
    let pid = victim.id();
    let limits_before = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    t.py(
        &[],
        &format!(
            "import resource, ctypes\n\
             libc = ctypes.CDLL(None, use_errno=True)\n\
             def sc(r):\n\
             \x20   if r != 0:\n\
             \x20       raise OSError(ctypes.get_errno(), 'call')\n\
             check('prlimit', lambda: resource.prlimit({pid}, resource.RLIMIT_CPU, (1, 1)))\n\
             check('own_nice', lambda: os.setpriority(os.PRIO_PROCESS, 0, 5))\n\
             check('setpriority', lambda: os.setpriority(os.PRIO_PROCESS, {pid}, 19))\n\
             check('prio_user', lambda: os.setpriority(os.PRIO_USER, os.getuid(), 19))\n\
             check('affinity', lambda: os.sched_setaffinity({pid}, {{0}}))\n\
             check('ioprio', lambda: sc(libc.syscall(251, 1, {pid}, (3 << 13))))\n\
             check('own_prlimit', lambda: resource.prlimit(0, resource.RLIMIT_CORE, (0, 0)))"
        ),
    )
    .expect_any("prlimit", SIGNAL_REFUSED)
    .expect_any("setpriority", SIGNAL_REFUSED)
    .expect_any("affinity", SIGNAL_REFUSED)
    .expect_any("ioprio", SIGNAL_REFUSED)
    .expect("own_prlimit", "OK")
    .expect("own_nice", "OK");
    std::thread::sleep(Duration::from_millis(100));
    assert!(victim.try_wait().unwrap().is_none(), "the outside process died");
    assert_eq!(
        std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap(),
        limits_before
    );
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let nice: i64 = stat.rsplit(')').next().unwrap().split_whitespace().nth(16).unwrap().parse().unwrap();
    assert_eq!(nice, 0, "the outside process's priority changed");
    victim.kill().unwrap();
    victim.wait().unwrap();
}

#[test]
fn a_child_of_the_server_reads_its_own_proc_self() {
    // The server's children need their own /proc/self too (runtimes read
    // /proc/self/maps, fd, status).
    let t = tree();
    let out = t.run(
        &[],
        &[
            "/bin/sh",
            "-c",
            "cat /proc/self/status >/dev/null && echo self=OK; sh -c 'ls /proc/self/fd >/dev/null && echo grandchild=OK'",
        ],
    );
    let s = stdout(&out);
    if t.namespaces {
        assert!(s.contains("self=OK") && s.contains("grandchild=OK"), "{s}\n{}", stderr(&out));
    } else {
        // Without a PID namespace of its own, only the server's own
        // /proc entry is open (its children are refused theirs): the
        // documented cost of running without namespaces.
        assert!(!s.contains("self=OK"), "{s}");
    }
}

#[test]
fn the_server_never_holds_the_users_terminal() {
    // rootfence's streams are a terminal: the server gets pipes relayed by
    // rootfence, so it can neither keep the terminal after rootfence
    // returns nor change its modes; what it reads and writes still flows.
    let t = tree();
    let launcher = r#"
import os, pty, subprocess, sys, time
m, s = pty.openpty()
p = subprocess.Popen(sys.argv[1:], stdin=s, stdout=s, stderr=s, start_new_session=True)
os.close(s)
os.write(m, b"typed line\n")
seen = b''
deadline = time.time() + 20
while time.time() < deadline and b'done' not in seen:
    try:
        chunk = os.read(m, 4096)
    except OSError:
        break
    if not chunk:
        break
    seen += chunk
p.wait()
sys.stdout.write(seen.decode(errors='replace').replace('\r', ''))
"#;
    let probe = "import os, sys, termios\n\
         print('ttys=' + ''.join('1' if os.isatty(fd) else '0' for fd in (0, 1, 2)))\n\
         def setattr():\n\
         \x20   termios.tcsetattr(1, termios.TCSANOW, termios.tcgetattr(1))\n\
         try:\n\
         \x20   setattr(); print('tcsetattr=OK')\n\
         except termios.error as e:\n\
         \x20   print('tcsetattr=refused')\n\
         print('read=' + sys.stdin.readline().strip())\n\
         print('done', flush=True)";
    let out = on_a_terminal(&t, launcher, probe);
    common::Probe::new(out)
        .expect("ttys", "000")
        .expect("tcsetattr", "refused")
        .expect("read", "typed line");
}

#[test]
fn calls_no_server_needs_are_refused_and_unknown_ones_are_missing() {
    // The seccomp filter is an allow-list: a call it does not list (here
    // one a future kernel might add) answers ENOSYS as if the kernel
    // lacked it; address randomization cannot be turned off; no namespace
    // can be made, by clone or unshare.
    let t = tree();
    t.py(
        &[],
        "import ctypes\n\
         libc = ctypes.CDLL(None, use_errno=True)\n\
         def sc(*a):\n\
         \x20   r = libc.syscall(*a)\n\
         \x20   if r < 0:\n\
         \x20       raise OSError(ctypes.get_errno(), 'syscall')\n\
         \x20   return r\n\
         check('future_call', lambda: sc(500, 0, 0, 0))\n\
         check('query_personality', lambda: sc(135, 0xffffffff))\n\
         check('no_randomize', lambda: sc(135, 0x0040000))\n\
         check('clone_newnet', lambda: sc(56, 0x40000000 | 17, 0, 0, 0, 0))\n\
         check('unshare_newtime', lambda: sc(272, 0x80))\n\
         check('unshare_files', lambda: sc(272, 0x400))",
    )
    .expect("future_call", "ENOSYS")
    .expect("query_personality", "OK")
    .expect("no_randomize", "EPERM")
    .expect("clone_newnet", "EPERM")
    .expect("unshare_newtime", "EPERM")
    .expect("unshare_files", "OK");
}

#[test]
fn the_server_runs_as_the_suites_user() {
    // What the other cases run as: root, or the unprivileged test user.
    let t = tree();
    let (uid, gid) = t.runner();
    t.py(&[], "print('uid=%d' % os.getuid())\nprint('gid=%d' % os.getgid())")
        .success()
        .expect("uid", &uid.to_string())
        .expect("gid", &gid.to_string());
}
