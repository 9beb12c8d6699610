//! `[resources]`: a server cannot take the machine. Each bound is attacked
//! by a real program (a fork bomb, a thread bomb, a big allocation,
//! descriptors opened until refused, a scratch directory filled) next to its
//! allowed twin (a modest use that works), as root and as an unprivileged
//! user, with and without namespaces. Without namespaces processes and
//! scratch space are not bounded (`rootfence doctor` says so): those cases
//! show it. A server that hits a bound gets the error and the session goes
//! on.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use common::{Tree, python};

/// The bounds the tests set.
const POLICY: &str = "version = 1
[resources]
processes = 64
memory_mb = 256
open_files = 64
scratch_mb = 8
";

/// How many processes the server may have at once in `t`'s mode:
/// `RLIMIT_NPROC` in its own user namespace counts the init too, so 63
/// children of the server; as root the PID namespace's `kernel.pid_max`
/// (64 + 300) leaves pids 3 to 363 to them; without namespaces, no bound.
fn child_bound(t: &Tree) -> Option<std::ops::RangeInclusive<usize>> {
    // SAFETY: geteuid cannot fail.
    let unprivileged = t.user.is_some() || unsafe { libc::geteuid() } != 0;
    match (t.namespaces, unprivileged) {
        (false, _) => None,
        (true, true) => Some(63..=63),
        (true, false) => Some(64..=361),
    }
}

/// Fork `n` children that wait (holding their pid) until told to go, or
/// until the kernel refuses one.
fn forks(n: usize) -> String {
    format!(
        "r, w = os.pipe()\n\
         kids, err = [], 'OK'\n\
         for i in range({n}):\n\
         \x20   try:\n\
         \x20       pid = os.fork()\n\
         \x20   except OSError as e:\n\
         \x20       err = errno.errorcode[e.errno]\n\
         \x20       break\n\
         \x20   if pid == 0:\n\
         \x20       os.close(w); os.read(r, 1); os._exit(0)\n\
         \x20   kids.append(pid)\n\
         os.close(w)\n\
         for k in kids:\n\
         \x20   os.waitpid(k, 0)\n\
         print('forked=%d' % len(kids))\n\
         print('fork=' + err)"
    )
}

/// Start `n` threads that wait (blocked on a pipe), or until one is
/// refused. `_thread` rather than `threading`: `Thread.start` waits for the
/// new thread to start, and a thread that starts but cannot allocate dies
/// (MemoryError) without ever saying so, leaving that wait hung. Small
/// stacks, so that the process bound, not the memory bound, is the one
/// the bomb meets.
fn threads(n: usize) -> String {
    format!(
        "import _thread\n\
         _thread.stack_size(64 * 1024)\n\
         r, w = os.pipe()\n\
         count, err = 0, 'OK'\n\
         for i in range({n}):\n\
         \x20   try:\n\
         \x20       _thread.start_new_thread(os.read, (r, 1))\n\
         \x20   except RuntimeError as e:\n\
         \x20       err = 'refused'\n\
         \x20       break\n\
         \x20   count += 1\n\
         print('threads=%d' % count)\n\
         print('thread=' + err, flush=True)\n\
         os._exit(0)"
    )
}

fn run(t: &Tree, code: &str) -> common::Probe {
    let policy = t.policy("resources.toml", POLICY);
    t.py(&["--policy", &policy], code)
}

fn forked(p: &common::Probe) -> usize {
    p.value("forked").parse().expect("a count")
}

fn fork_bomb(t: &Tree) {
    // The twin: a modest number of processes works.
    run(t, &forks(20))
        .success()
        .expect("forked", "20")
        .allowed("fork");
    let p = run(t, &forks(1000));
    p.success();
    match child_bound(t) {
        Some(bound) => {
            assert!(bound.contains(&forked(&p)), "{} children", forked(&p));
            p.expect("fork", "EAGAIN");
        }
        None => {
            // Not bounded without namespaces: the row doctor reports open.
            let p = run(t, &forks(200));
            p.expect("forked", "200").allowed("fork");
        }
    }
}

fn thread_bomb(t: &Tree) {
    run(t, &threads(20))
        .success()
        .expect("threads", "20")
        .allowed("thread");
    let p = run(t, &threads(1000));
    p.success();
    let n: usize = p.value("threads").parse().unwrap();
    match child_bound(t) {
        Some(bound) => {
            assert!(n <= *bound.end(), "{n} threads");
            assert!(n >= 50, "{n} threads: the bound is far below the policy's");
            p.expect("thread", "refused");
        }
        None => {
            let p = run(t, &threads(200));
            p.expect("threads", "200").allowed("thread");
        }
    }
}

fn memory(t: &Tree) {
    run(
        t,
        "def alloc(mib):\n\
         \x20   try:\n\
         \x20       b = bytearray(mib << 20)\n\
         \x20       b[-1] = 1\n\
         \x20       return 'OK'\n\
         \x20   except MemoryError:\n\
         \x20       return 'MemoryError'\n\
         print('small=' + alloc(32))\n\
         print('big=' + alloc(512))\n\
         print('after=' + alloc(32))",
    )
    .success()
    .expect("small", "OK")
    .expect("big", "MemoryError")
    .expect("after", "OK");
}

/// Open `/dev/null` until refused (at most 1000), print how many and the
/// error, close one and open again.
const OPEN_UNTIL_REFUSED: &str = "fds, err = [], 'OK'\n\
     for i in range(1000):\n\
     \x20   try:\n\
     \x20       fds.append(os.open('/dev/null', os.O_RDONLY))\n\
     \x20   except OSError as e:\n\
     \x20       err = errno.errorcode[e.errno]\n\
     \x20       break\n\
     print('opened=%d' % len(fds))\n\
     print('open=' + err)\n\
     os.close(fds[0])\n\
     check('reopen', lambda: os.close(os.open('/dev/null', os.O_RDONLY)))";

/// Descriptors opened until refused, next to the twin: one closed, one
/// opened again.
fn held_to(p: &common::Probe, opened: std::ops::RangeInclusive<usize>) {
    p.success().expect("open", "EMFILE").allowed("reopen");
    let n: usize = p.value("opened").parse().unwrap();
    assert!(opened.contains(&n), "{n} descriptors opened");
}

fn descriptors(t: &Tree) {
    held_to(&run(t, OPEN_UNTIL_REFUSED), 50..=61);
}

/// A descriptor bound below the count rootfence holds while it launches
/// (its rules, pipes and filter): the bound is set last, so the server
/// still starts, and is held to it.
fn few_descriptors(t: &Tree) {
    let policy = t.policy("few.toml", "version = 1\n[resources]\nopen_files = 12\n");
    held_to(&t.py(&["--policy", &policy], OPEN_UNTIL_REFUSED), 1..=9);
}

fn scratch(t: &Tree) {
    let p = run(
        t,
        "d = os.environ['TMPDIR']\n\
         def fill(name, mib):\n\
         \x20   with open(d + '/' + name, 'wb') as f:\n\
         \x20       for i in range(mib):\n\
         \x20           f.write(b'x' * (1 << 20))\n\
         \x20       f.flush()\n\
         \x20       os.fsync(f.fileno())\n\
         check('small', lambda: fill('small', 1))\n\
         check('big', lambda: fill('big', 16))\n\
         check('remove', lambda: os.unlink(d + '/big'))\n\
         check('after', lambda: fill('after', 1))\n\
         def many():\n\
         \x20   for i in range(5000):\n\
         \x20       open(d + '/f%d' % i, 'w').close()\n\
         check('files', many)",
    );
    p.success()
        .expect("small", "OK")
        .expect("remove", "OK")
        .expect("after", "OK");
    if t.namespaces {
        p.expect("big", "ENOSPC").expect("files", "ENOSPC");
    } else {
        // Not bounded without namespaces: TMPDIR is on the host's disk.
        p.expect("big", "OK").expect("files", "OK");
    }
}

/// A stdio JSON-RPC server whose `exhaust` call runs a fork bomb and
/// answers what it got, and whose `alive` call answers a token it drew at
/// start (another server would answer another).
const SERVER: &str = r#"
import errno, json, os, sys
token = os.urandom(8).hex()
def bomb():
    r, w = os.pipe()
    kids = []
    try:
        for i in range(1000):
            pid = os.fork()
            if pid == 0:
                os.close(w); os.read(r, 1); os._exit(0)
            kids.append(pid)
        out = 'none'
    except OSError as e:
        out = errno.errorcode[e.errno]
    os.close(w)
    for k in kids:
        os.waitpid(k, 0)
    return '%s after %d' % (out, len(kids))
for line in sys.stdin:
    req = json.loads(line)
    if 'id' not in req:
        continue
    if req['method'] == 'initialize':
        result = {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                  "serverInfo": {"name": "exhausting", "version": "1"}}
    elif req['params']['name'] == 'exhaust':
        result = {"content": [{"type": "text", "text": bomb()}]}
    else:
        result = {"content": [{"type": "text", "text": "alive " + token}]}
    print(json.dumps({"jsonrpc": "2.0", "id": req["id"], "result": result}), flush=True)
"#;

fn session_goes_on(t: &Tree) {
    let policy = t.policy("resources.toml", POLICY);
    let mut c = t.rootfence_command();
    c.args(["run", "--policy", &policy, "--root"])
        .arg(&t.r)
        .arg("--")
        .arg(python())
        .arg("-c")
        .arg(SERVER)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", &t.home)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    t.as_runner(&mut c);
    let mut child = c.spawn().unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut ask = |line: &str| {
        writeln!(stdin, "{line}").unwrap();
        let mut answer = String::new();
        stdout.read_line(&mut answer).unwrap();
        answer
    };
    let init = ask(
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
    );
    assert!(init.contains("exhausting"), "{init}");
    let call = |id: u32, name: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{name}","arguments":{{}}}}}}"#
        )
    };
    let text = |line: String| -> String {
        let v: serde_json::Value = serde_json::from_str(&line).expect("a JSON-RPC line");
        v["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_else(|| panic!("no text in {line}"))
            .to_string()
    };
    let before = text(ask(&call(2, "alive")));
    assert!(before.starts_with("alive "), "{before}");
    let bomb = text(ask(&call(3, "exhaust")));
    assert!(bomb.starts_with("EAGAIN after"), "{bomb}");
    // The same server answers after hitting the bound: the session goes
    // on, and it was not restarted.
    let after = text(ask(&call(4, "alive")));
    assert_eq!(after, before, "the server changed or stopped");
    drop(stdin);
    assert!(child.wait().unwrap().success());
}

macro_rules! modes {
    ($($case:ident),*) => {
        mod as_root {
            use super::*;
            $(#[test] fn $case() { super::$case(&Tree::new()); })*
        }
        mod as_root_without_namespaces {
            use super::*;
            $(#[test] fn $case() { super::$case(&Tree::without_namespaces()); })*
        }
        mod unprivileged {
            use super::*;
            $(#[test] fn $case() { super::$case(&Tree::unprivileged(true)); })*
        }
        mod unprivileged_without_namespaces {
            use super::*;
            $(#[test] fn $case() { super::$case(&Tree::unprivileged(false)); })*
        }
    };
}

modes!(
    fork_bomb,
    thread_bomb,
    memory,
    descriptors,
    few_descriptors,
    scratch
);

#[test]
fn a_server_that_hits_the_process_bound_goes_on_answering() {
    session_goes_on(&Tree::new());
}

#[test]
fn a_server_that_hits_the_process_bound_goes_on_answering_unprivileged() {
    session_goes_on(&Tree::unprivileged(true));
}

/// `doctor` says which bounds apply here, in the words of the README.
#[test]
fn doctor_says_which_bounds_apply() {
    let out = Command::new(common::rootfence())
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = v["coverage"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| {
            r["class"]
                .as_str()
                .is_some_and(|c| c.starts_with("the machine's resources"))
        })
        .expect("a resources row")
        .clone();
    let how = row["how"].as_str().unwrap();
    for what in [
        "processes and threads:",
        "memory:",
        "open files:",
        "scratch space:",
    ] {
        assert!(how.contains(what), "{how}");
    }
}
